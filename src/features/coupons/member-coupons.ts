import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { CouponRow, DB } from '../../db/schema.js';

/** A member's coupons as the API shows them. */

interface Coupon {
  id: string;
  campaignId: string;
  memberId: string;
  month: string;
  amountYen: number;
  issuedAt: Date;
  /** Its campaign's couponsExpireAt; null: never. */
  expiresAt: Date | null;
}

export type CouponColumns = Pick<CouponRow, 'id' | 'campaign_id' | 'member_id' | 'month' | 'amount_yen' | 'issued_at'> & {
  /** The campaign's coupons_expire_at. */
  expires_at: Date | null;
};

/** What a coupon's status is read from: its row, and whether its campaign's couponsExpireAt has passed on the database's clock. */
export type CouponStatusColumns = Pick<CouponRow, 'redeemed_at' | 'voided_at' | 'held_by_order_id'> & { expired: boolean };

/**
 * HELD: a PENDING_PAYMENT order holds it until its payment is known (docs/design.md §11). EXPIRED:
 * its couponsExpireAt has passed and nothing holds or redeemed it; read from the time, never written.
 */
export type CouponStatus = 'AVAILABLE' | 'HELD' | 'REDEEMED' | 'VOIDED' | 'EXPIRED';

/** A coupon with its status, where the statement that read it read the status too. */
export interface CouponWithStatus extends Coupon {
  status?: CouponStatus;
}

/**
 * A held coupon stays HELD past its expiry: the order that held it in time may still be paid with it.
 *
 * @example couponStatusOf(row) // 'AVAILABLE'
 */
export function couponStatusOf(row: CouponStatusColumns): CouponStatus {
  if (row.voided_at !== null) return 'VOIDED';
  if (row.redeemed_at !== null) return 'REDEEMED';
  if (row.held_by_order_id !== null) return 'HELD';
  return row.expired ? 'EXPIRED' : 'AVAILABLE';
}

/**
 * A coupon row as the API's coupon, with its status when the row carries it.
 *
 * @example const coupon = toCoupon(row)
 */
export const toCoupon = (row: CouponColumns | (CouponColumns & CouponStatusColumns)): CouponWithStatus => ({
  id: row.id,
  campaignId: row.campaign_id,
  memberId: row.member_id,
  month: row.month,
  amountYen: row.amount_yen,
  issuedAt: row.issued_at,
  expiresAt: row.expires_at,
  ...('held_by_order_id' in row ? { status: couponStatusOf(row) } : {}),
});

/**
 * SQL true when the coupon row `coupon` is past its campaign's couponsExpireAt on the database's
 * clock (now(): the statement's, or its transaction's). A primary-key probe of the campaign: what a
 * redeem or a checkout's hold adds to the coupon's own row.
 *
 * @example sql`select 1 from coupons where not ${couponExpired('coupons')}`
 */
export const couponExpired = (coupon: string) =>
  sql<boolean>`exists (select 1 from campaigns c where c.tenant_id = ${sql.raw(coupon)}.tenant_id and c.id = ${sql.raw(coupon)}.campaign_id
                          and now() >= c.coupons_expire_at)`;

/**
 * SQL true when a coupon of a campaign whose couponsExpireAt is `expiresAt` is past it on the
 * database's clock (now()); false for a campaign whose coupons never expire. The `expired` of
 * CouponStatusColumns, wherever a statement reads a coupon's status.
 *
 * @example sql`select ${expiredBy(sql`c.coupons_expire_at`)} as expired from campaigns c`
 */
export const expiredBy = (expiresAt: RawBuilder<Date | null>) => sql<boolean>`coalesce(now() >= ${expiresAt}, false)`;

/** Coupons with their campaign's expiry: every read of a coupon the API shows. */
function couponsWithExpiry(db: Kysely<DB>, tenantId: string) {
  return db
    .selectFrom('coupons as k')
    .innerJoin('campaigns as c', (join) => join.onRef('c.tenant_id', '=', 'k.tenant_id').onRef('c.id', '=', 'k.campaign_id'))
    .select(['k.id', 'k.campaign_id', 'k.member_id', 'k.month', 'k.amount_yen', 'k.issued_at', 'k.redeemed_at', 'k.voided_at'])
    .select(['k.held_by_order_id', 'c.coupons_expire_at as expires_at', expiredBy(sql`c.coupons_expire_at`).as('expired')])
    .where('k.tenant_id', '=', tenantId);
}

/**
 * The status of each coupon of `ids` in the tenant, as last committed: for coupons read without it.
 *
 * @example const statuses = await couponStatuses(trx, tenantId, [couponId])
 */
export async function couponStatuses(db: Kysely<DB>, tenantId: string, ids: readonly string[]): Promise<Map<string, CouponStatus>> {
  const rows = await couponsWithExpiry(db, tenantId)
    .where('k.id', 'in', [...ids])
    .execute();
  return new Map(rows.map((row) => [row.id, couponStatusOf(row)]));
}

/**
 * A member's coupons, newest first.
 *
 * @example const coupons = await listMemberCoupons(trx, tenantId, memberId, 100)
 */
export async function listMemberCoupons(db: Kysely<DB>, tenantId: string, memberId: string, limit: number): Promise<CouponWithStatus[]> {
  const rows = await couponsWithExpiry(db, tenantId)
    .where('k.member_id', '=', memberId)
    .where('k.voided_at', 'is', null)
    .orderBy('k.issued_at', 'desc')
    .orderBy('k.id')
    .limit(limit)
    .execute();
  return rows.map(toCoupon);
}

/**
 * The member's coupon `couponId` with its status, as last committed; undefined when the member has no such coupon.
 *
 * @example const coupon = await findMemberCouponById(trx, tenantId, memberId, couponId)
 */
export function findMemberCouponById(db: Kysely<DB>, tenantId: string, memberId: string, couponId: string) {
  return couponsWithExpiry(db, tenantId).where('k.id', '=', couponId).where('k.member_id', '=', memberId).executeTakeFirst();
}
