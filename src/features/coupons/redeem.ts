import { sql, type Transaction } from 'kysely';
import type { CouponRow, DB } from '../../db/schema.js';
import { RollbackAndReturn } from '../../db/transaction.js';
import { notFound } from '../../core/errors.js';
import { couponExpired, findMemberCouponById, toCoupon, type CouponWithStatus } from './member-coupons.js';

type RedeemStatus = 'REDEEMED' | 'ALREADY_REDEEMED' | 'VOIDED' | 'HELD' | 'EXPIRED';

export interface RedeemResult {
  status: RedeemStatus;
  coupon: CouponWithStatus;
  /** When the coupon was redeemed (by this request or an earlier one); null for a coupon it was not. */
  redeemedAt: Date | null;
}

/**
 * What redeemCoupon's audit row names: the coupon and its campaign.
 *
 * @example redeemEntities(result) // [couponId, campaignId]
 */
export const redeemEntities = ({ coupon }: RedeemResult): string[] => [coupon.id, coupon.campaignId];

interface RedeemRequest {
  tenantId: string;
  /** The session's member: only the coupon's owner redeems it. */
  memberId: string;
  couponId: string;
  /** From the server's clock: the redeemedAt it records (its expiry is judged on the database's clock). */
  now: Date;
}

export const COUPON_REDEEMED_TOPIC = 'coupon.redeemed';

type RedeemedColumns = Pick<
  CouponRow,
  'id' | 'campaign_id' | 'member_id' | 'month' | 'amount_yen' | 'issued_at' | 'redeemed_at' | 'voided_at' | 'held_by_order_id'
> & { expires_at: Date | null; expired: boolean };

/**
 * Redeems the member's coupon once, whatever the concurrency, on READ COMMITTED.
 *
 * The conflict lands on the coupon's own row (docs/design.md §4): one conditional UPDATE both
 * decides and writes. Two redeems of one coupon queue on its row lock; the second re-checks
 * `redeemed_at is null` against the first one's committed row and updates nothing. The
 * `coupon.redeemed` outbox event rides in the same statement, written only with the update, so
 * there is one event per redemption and none for a refusal. When nothing was updated, a second
 * statement (a fresh snapshot, which sees the redeem that won) says why: redeemed already, voided,
 * or not this member's coupon in this tenant (NOT_FOUND, the same answer as a coupon that does not
 * exist, so a member learns nothing of other members' coupons). A voided coupon is refused as data
 * and leaves nothing behind (RollbackAndReturn), and so is a coupon a checkout holds (HELD): its
 * order's payment decides whether it is redeemed for that order or given back (docs/design.md §11).
 * So is a coupon past its campaign's couponsExpireAt (EXPIRED), judged on the database's clock in
 * the UPDATE itself, so that no redeem lands after the instant whatever the server's clock says.
 *
 * @example await redeemCoupon(trx, { tenantId, memberId, couponId, now: new Date() })
 */
async function redeemCoupon(trx: Transaction<DB>, request: RedeemRequest): Promise<RedeemResult> {
  const { tenantId, memberId, couponId, now } = request;
  const redeemed = await sql<RedeemedColumns>`
    with redeemed as (
      update coupons k set redeemed_at = ${now}
       where tenant_id = ${tenantId} and id = ${couponId} and member_id = ${memberId}
         and redeemed_at is null and voided_at is null and held_by_order_id is null and not ${couponExpired('k')}
      returning id, campaign_id, member_id, month, amount_yen, issued_at, redeemed_at, voided_at, held_by_order_id,
                (select c.coupons_expire_at from campaigns c where c.tenant_id = k.tenant_id and c.id = k.campaign_id) as expires_at,
                false as expired
    ), event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${COUPON_REDEEMED_TOPIC},
             jsonb_build_object('couponId', id, 'tenantId', ${tenantId}::text, 'campaignId', campaign_id, 'memberId', member_id,
                                'amountYen', amount_yen, 'redeemedAt', ${now.toISOString()}::text)
        from redeemed
    )
    select * from redeemed`.execute(trx);
  const row = redeemed.rows[0];
  if (row) return { status: 'REDEEMED', coupon: toCoupon(row), redeemedAt: row.redeemed_at };
  return whyNotRedeemed(trx, request);
}

/**
 * The member's coupon as the last committed redeem, hold or void left it: the answer when the
 * UPDATE changed nothing. Its expiry is read at the transaction's now(), the instant the UPDATE
 * judged it at.
 */
async function whyNotRedeemed(trx: Transaction<DB>, { tenantId, memberId, couponId }: RedeemRequest): Promise<RedeemResult> {
  const found = await findMemberCouponById(trx, tenantId, memberId, couponId);
  if (!found) throw notFound('Coupon');
  const coupon = toCoupon(found);
  if (coupon.status === 'REDEEMED') return { status: 'ALREADY_REDEEMED', coupon, redeemedAt: found.redeemed_at };
  // VOIDED, HELD or EXPIRED (an AVAILABLE one would have been redeemed): data, and nothing kept.
  throw new RollbackAndReturn<RedeemResult>({ status: coupon.status as Exclude<RedeemStatus, 'REDEEMED'>, coupon, redeemedAt: null });
}

/** How a coupon is redeemed (AppServices.couponRedeemer; buildServices takes a stand-in); the naive test stands the read-check-write version in for it. */
export interface CouponRedeemer {
  redeem(trx: Transaction<DB>, request: RedeemRequest): Promise<RedeemResult>;
}

export const couponRedeemer: CouponRedeemer = { redeem: redeemCoupon };
