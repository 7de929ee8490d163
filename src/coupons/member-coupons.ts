import type { Kysely, Transaction } from 'kysely';
import type { CouponRow, DB } from '../db/schema.js';
import type { Coupon, IssueRequest } from './issue.js';

/** A member's coupons as the API shows them. */

export type CouponColumns = Pick<CouponRow, 'id' | 'campaign_id' | 'member_id' | 'month' | 'amount_yen' | 'issued_at'>;

export const toCoupon = (row: CouponColumns): Coupon => ({
  id: row.id,
  campaignId: row.campaign_id,
  memberId: row.member_id,
  month: row.month,
  amountYen: row.amount_yen,
  issuedAt: row.issued_at,
});

export async function listMemberCoupons(db: Kysely<DB>, tenantId: string, memberId: string, limit: number): Promise<Coupon[]> {
  const rows = await db
    .selectFrom('coupons')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('member_id', '=', memberId)
    .where('voided_at', 'is', null)
    .orderBy('issued_at', 'desc')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toCoupon);
}

/** The member's coupon of the campaign, committed by a transaction the first statement waited for. */
export async function findMemberCoupon(trx: Transaction<DB>, { tenantId, campaignId, memberId }: IssueRequest): Promise<Coupon> {
  const existing = await trx
    .selectFrom('coupons')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('member_id', '=', memberId)
    .where('legacy_duplicate', '=', false)
    .executeTakeFirstOrThrow();
  return toCoupon(existing);
}
