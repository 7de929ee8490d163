import type { Kysely, Transaction } from 'kysely';
import type { CouponRow, DB } from '../../db/schema.js';
import type { Coupon, IssueRequest } from './issue.js';

/** A member's coupons as the API shows them. */

export type CouponColumns = Pick<CouponRow, 'id' | 'campaign_id' | 'member_id' | 'month' | 'amount_yen' | 'issued_at'>;

/** What a coupon's status is read from. */
export type CouponStatusColumns = Pick<CouponRow, 'redeemed_at' | 'voided_at' | 'held_by_order_id'>;

/** HELD: a PENDING_PAYMENT order holds it until its payment is known (docs/design.md §11). */
export type CouponStatus = 'AVAILABLE' | 'HELD' | 'REDEEMED' | 'VOIDED';

/** A coupon with its status, where the statement that read it read the status too. */
export interface CouponWithStatus extends Coupon {
  status?: CouponStatus;
}

export function couponStatusOf(row: CouponStatusColumns): CouponStatus {
  if (row.voided_at !== null) return 'VOIDED';
  if (row.redeemed_at !== null) return 'REDEEMED';
  return row.held_by_order_id === null ? 'AVAILABLE' : 'HELD';
}

export const toCoupon = (row: CouponColumns | (CouponColumns & CouponStatusColumns)): CouponWithStatus => ({
  id: row.id,
  campaignId: row.campaign_id,
  memberId: row.member_id,
  month: row.month,
  amountYen: row.amount_yen,
  issuedAt: row.issued_at,
  ...('held_by_order_id' in row ? { status: couponStatusOf(row) } : {}),
});

/** The status of each coupon of `ids` in the tenant, as last committed: for coupons read without it. */
export async function couponStatuses(db: Kysely<DB>, tenantId: string, ids: readonly string[]): Promise<Map<string, CouponStatus>> {
  const rows = await db
    .selectFrom('coupons')
    .select(['id', 'redeemed_at', 'voided_at', 'held_by_order_id'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', [...ids])
    .execute();
  return new Map(rows.map((row) => [row.id, couponStatusOf(row)]));
}

export async function listMemberCoupons(db: Kysely<DB>, tenantId: string, memberId: string, limit: number): Promise<CouponWithStatus[]> {
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
export async function findMemberCoupon(trx: Transaction<DB>, { tenantId, campaignId, memberId }: IssueRequest): Promise<CouponWithStatus> {
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
