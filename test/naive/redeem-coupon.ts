import { sql } from 'kysely';
import { COUPON_REDEEMED_TOPIC, type CouponRedeemer, type RedeemResult } from '../../src/features/coupons/redeem.js';
import { RollbackAndReturn } from '../../src/db/transaction.js';
import { notFound } from '../../src/core/errors.js';

/**
 * The redeem a newcomer writes first, kept to prove the concurrency test can fail: read the coupon,
 * decide in TypeScript, then write. On READ COMMITTED two requests that read `redeemed_at is null`
 * before either commits both redeem: two REDEEMED answers, two `coupon.redeemed` events (the
 * discount handed out twice), and the later one's time overwrites the earlier one's.
 * `think` stands in for the work such code does between its read and its write (an ORM's load and
 * save, a call to the till). A fixed few milliseconds of it left the race to the machine: a CI run
 * whose cores were busy spread the requests of each coupon out and showed no double redeem. It now
 * lasts until another request has read the same coupon unredeemed (at most THINK_MAX_MS), so that
 * two requests of a coupon that run at once always both read before either writes.
 */
const THINK_MAX_MS = 1_000;

/** The first reader of a coupon that is still thinking, by coupon id: what wakes it. */
const thinking = new Map<string, () => void>();

async function think(couponId: string): Promise<void> {
  const first = thinking.get(couponId);
  if (first) {
    thinking.delete(couponId);
    first();
    return;
  }
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      thinking.delete(couponId);
      resolve();
    }, THINK_MAX_MS);
    thinking.set(couponId, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
export const naiveRedeemer: CouponRedeemer = {
  async redeem(trx, { tenantId, memberId, couponId, now }) {
    const found = await trx
      .selectFrom('coupons')
      .select(['id', 'campaign_id', 'member_id', 'month', 'amount_yen', 'issued_at', 'redeemed_at', 'voided_at'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', couponId)
      .where('member_id', '=', memberId)
      .executeTakeFirst();
    if (!found) throw notFound('Coupon');
    const coupon = {
      id: found.id,
      campaignId: found.campaign_id,
      memberId: found.member_id,
      month: found.month,
      amountYen: found.amount_yen,
      issuedAt: found.issued_at,
      expiresAt: null,
    };
    if (found.voided_at !== null) throw new RollbackAndReturn<RedeemResult>({ status: 'VOIDED', coupon, redeemedAt: null });
    if (found.redeemed_at !== null) return { status: 'ALREADY_REDEEMED', coupon, redeemedAt: found.redeemed_at };
    await think(couponId);
    await trx.updateTable('coupons').set({ redeemed_at: now }).where('tenant_id', '=', tenantId).where('id', '=', couponId).execute();
    await sql`insert into outbox_events (tenant_id, topic, payload)
              values (${tenantId}, ${COUPON_REDEEMED_TOPIC}, ${JSON.stringify({ couponId, tenantId, redeemedAt: now.toISOString() })}::jsonb)`.execute(
      trx,
    );
    return { status: 'REDEEMED', coupon, redeemedAt: now };
  },
};
