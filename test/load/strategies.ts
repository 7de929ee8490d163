import { sql } from 'kysely';
import type { CouponIssuer } from '../../src/features/coupons/issue.js';
import type { BudgetSplit } from '../../src/features/coupons/campaigns.js';
import type { BudgetLeasing } from '../../src/features/coupons/leases.js';
import { evenYenSplit } from '../naive/budget-split.js';
import { ownLeaseOnly } from '../naive/budget-leases.js';
import { naiveIssuer, readCheckWriteIssuer } from '../naive/issue-coupon.js';
import { processClock } from '../naive/process-clock.js';

/**
 * The designs the benchmark puts side by side. Only `conditional updates` is the product; the
 * peers are the read-check-write code made safe by isolation or by locks, plus the naive one.
 */
export const serializableIssuer = readCheckWriteIssuer({ name: 'SERIALIZABLE + retries', isolation: 'serializable', notifyInline: false });

/** Read-check-write behind per-member and per-campaign advisory locks, always in that order. */
export const advisoryLockIssuer = readCheckWriteIssuer({
  name: 'advisory locks',
  notifyInline: false,
  async lockFirst(trx, { tenantId, memberId, campaignId }) {
    await sql`select pg_advisory_xact_lock(hashtextextended('member' || chr(31) || ${tenantId} || chr(31) || ${memberId}, 0))`.execute(trx);
    await sql`select pg_advisory_xact_lock(hashtextextended('campaign' || chr(31) || ${tenantId} || chr(31) || ${campaignId}, 0))`.execute(
      trx,
    );
  },
});

/**
 * The naive twin of the one clock: read-check-write that judges the campaign's period on the server
 * process's own clock, BENCH_CLOCK_SKEW_MS off the database's, stamps the coupon with it, and writes
 * its outbox event (whose created_at is the database's time of the transaction).
 */
export const processClockIssuer = readCheckWriteIssuer({ name: 'process clock', notifyInline: false, clock: processClock() });

/** A server's coupon design: the issuer (absent: the product's), with leases which lease an issue may take from, and how budgets are split over slots. */
export interface Strategy {
  issuer?: CouponIssuer;
  leasing?: BudgetLeasing;
  split?: BudgetSplit;
}

export const STRATEGIES: Record<string, Strategy> = {
  naive: { issuer: naiveIssuer },
  serializable: { issuer: serializableIssuer },
  advisory: { issuer: advisoryLockIssuer },
  conditional: {},
  'naive-leases': { leasing: ownLeaseOnly },
  'naive-split': { split: evenYenSplit },
  'naive-clock': { issuer: processClockIssuer },
};
