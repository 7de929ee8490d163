import fc from 'fast-check';
import type { CouponScenario } from '../load/scenarios/coupons.js';
import { runSpread, type SpreadRunResult } from './coupon-run.js';
import type { TestBackend } from './harness.js';

/** One campaign of the sell-out property: its budget in whole coupons and the yen that pays for none, its rows, and who races for it. */
export interface SellOutCase {
  discountYen: number;
  /** floor(budgetYen / discountYen): what the campaign must issue, exactly. */
  coupons: number;
  /** budgetYen - coupons x discountYen, less than one coupon. */
  remainderYen: number;
  budgetSlots: number;
  budgetLeaseCoupons: number;
  /** Members beyond the coupons, so that the campaign sells out and refuses the rest. */
  extraMembers: number;
}

export type CampaignShape = 'one row' | 'slots' | 'leases';

/**
 * Campaigns of every shape: any discount, a budget of up to 40 coupons and less than one coupon's
 * yen more, slots up to one per coupon (64 at most), leases of one coupon to 10,000.
 */
export function sellOutCases(shapes: CampaignShape[] = ['one row', 'slots', 'leases']): fc.Arbitrary<SellOutCase> {
  return fc
    .record({
      shape: fc.constantFrom(...shapes),
      discountYen: fc.integer({ min: 1, max: 1_000 }),
      coupons: fc.integer({ min: 2, max: 40 }),
      remainderShare: fc.double({ min: 0, max: 0.999, noNaN: true }),
      slots: fc.integer({ min: 2, max: 64 }),
      leaseCoupons: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constant(10_000)),
      extraMembers: fc.integer({ min: 1, max: 16 }),
    })
    .map(({ shape, discountYen, coupons, remainderShare, slots, leaseCoupons, extraMembers }) => ({
      discountYen,
      coupons,
      remainderYen: Math.floor(remainderShare * discountYen),
      budgetSlots: shape === 'slots' ? Math.min(slots, coupons) : 1,
      budgetLeaseCoupons: shape === 'leases' ? leaseCoupons : 0,
      extraMembers,
    }));
}

/** The members of a case, all released together at this many in flight. */
const CONCURRENCY = 16;

export interface SellOutRun extends SpreadRunResult {
  budgetYen: number;
  /** The budget row's leased yen against the leases' own: they must agree. */
  leasedYen: { budgetRow: number; leases: number };
}

/**
 * One case against `backends` (one database): a campaign of its own, every member asking once,
 * spread over the backends. Counted in SQL afterwards, every refusal checked as it comes.
 */
export async function runSellOut(backends: TestBackend[], runId: string, c: SellOutCase): Promise<SellOutRun> {
  const budgetYen = c.coupons * c.discountYen + c.remainderYen;
  const members = c.coupons + c.extraMembers;
  const scenario: CouponScenario = {
    tenantId: `sell-${runId}`,
    capYen: 1_000_000_000,
    campaigns: [{ id: 'c', discountYen: c.discountYen, budgetYen, budgetSlots: c.budgetSlots, budgetLeaseCoupons: c.budgetLeaseCoupons }],
    members: Array.from({ length: members }, (_, i) => `m${i}`),
    sends: 1,
    expectedIssued: c.coupons,
  };
  const result = await runSpread(backends, scenario, CONCURRENCY);
  const leased = await backends[0]!.sql.query<{ budget_row: number; leases: number }>(
    `select (select leased_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'c' and slot = 0) as budget_row,
            (select coalesce(sum(budget_yen), 0)::int from campaign_budget_leases where tenant_id = $1 and campaign_id = 'c') as leases`,
    [scenario.tenantId],
  );
  return { ...result, budgetYen, leasedYen: { budgetRow: leased.rows[0]!.budget_row, leases: leased.rows[0]!.leases } };
}

/** What must hold after a run: the campaign sold out at floor(budgetYen / discountYen) x discountYen, nothing else refused or failed. */
export function sellOutViolations(c: SellOutCase, run: SellOutRun): string[] {
  const { ISSUED, BUDGET_EXCEEDED, ...others } = run.outcomes;
  const exact = ISSUED === c.coupons && BUDGET_EXCEEDED === c.extraMembers && Object.keys(others).length === 0;
  const outcomes = exact
    ? []
    : [`outcomes ${JSON.stringify(run.outcomes)} where ${c.coupons} ISSUED and ${c.extraMembers} BUDGET_EXCEEDED are due`];
  const leases = run.leasedYen.budgetRow === run.leasedYen.leases ? [] : [`leased yen ${JSON.stringify(run.leasedYen)}`];
  return [...run.invariants.violations, ...outcomes, ...leases];
}
