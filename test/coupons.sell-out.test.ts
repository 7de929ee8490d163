import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitByCoupons } from '../src/features/coupons/campaigns.js';
import { createTestBackend, createTestDatabaseUrl, type TestBackend } from './support/harness.js';
import { withoutRoleTimeouts } from './support/coupon-run.js';
import { budgetChangeCases, runBudgetRace } from './support/budget-race.js';
import { runSellOut, sellOutCases, sellOutViolations } from './support/sell-out.js';

// Exact sell-out: whatever budgetYen, discountYen, budgetSlots and budgetLeaseCoupons, a campaign
// issues floor(budgetYen / discountYen) coupons and refuses BUDGET_EXCEEDED only once less than one
// coupon is left; and with its budget changed at random points while members issue, it sells out
// exactly at the budget in force after the last change. test/coupons.sell-out.naive.test.ts runs the
// same property against the even split by yen and against leases that only their own process
// issues from, test/coupons.budget-change.naive.test.ts against a change without the slots' locks.

describe('splitByCoupons', () => {
  it('gives every slot whole coupons, the first slots one more, and slot 0 the yen no coupon can use', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: 1, max: 64 }),
        (discountYen, budgetYen, slots) => {
          fc.pre(Math.floor(budgetYen / discountYen) >= slots);
          const split = splitByCoupons(budgetYen, discountYen, slots);
          const coupons = split.map((yen) => Math.floor(yen / discountYen));
          expect(split).toHaveLength(slots);
          expect(split.reduce((sum, yen) => sum + yen, 0)).toBe(budgetYen);
          expect(coupons.reduce((sum, n) => sum + n, 0)).toBe(Math.floor(budgetYen / discountYen));
          expect(split.slice(1).every((yen) => yen % discountYen === 0)).toBe(true);
          expect(Math.max(...coupons) - Math.min(...coupons)).toBeLessThanOrEqual(1);
          expect(coupons.every((n, i) => i === 0 || n <= coupons[i - 1]!)).toBe(true);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('issueCoupon sells out exactly: random budgets, discounts, slots and leases, members racing', () => {
  // Two processes on the one statement (two lease holders) and one whose sessions lack the role's
  // timeouts, so that its issues run as the transaction; members go round them.
  let backends: TestBackend[];
  beforeAll(async () => {
    const databaseUrl = await createTestDatabaseUrl();
    backends = [
      await createTestBackend({ databaseUrl }),
      await createTestBackend({ databaseUrl }),
      await createTestBackend({ databaseUrl: withoutRoleTimeouts(databaseUrl) }),
    ];
  });
  afterAll(async () => {
    for (const backend of backends) await backend.close();
  });

  it('issues floor(budgetYen / discountYen) coupons and refuses only once less than one is left', async ({ annotate }) => {
    let run = 0;
    const seen: string[] = [];
    const reruns: Record<string, number> = {};
    let issues = 0;
    await fc.assert(
      fc.asyncProperty(sellOutCases(), async (c) => {
        const result = await runSellOut(backends, `p${run++}`, c);
        seen.push(`${c.coupons}x${c.discountYen}+${c.remainderYen} slots ${c.budgetSlots} lease ${c.budgetLeaseCoupons}`);
        issues += result.requests;
        for (const [state, n] of Object.entries(result.retries)) reruns[state] = (reruns[state] ?? 0) + n;
        expect(sellOutViolations(c, result), JSON.stringify(c)).toEqual([]);
      }),
      { numRuns: 40 },
    );
    await annotate(`${issues} issues, reruns ${JSON.stringify(reruns)}; campaigns sold out exactly: ${seen.join('; ')}`);
  });

  it('with budget changes at random points: never past the budget in force, then sold out exactly at the last figure', async ({
    annotate,
  }) => {
    let run = 0;
    const seen: string[] = [];
    await fc.assert(
      fc.asyncProperty(budgetChangeCases(), async ({ campaign, plan }) => {
        const result = await runBudgetRace(backends, `change-${run++}`, campaign, plan);
        seen.push(
          `slots ${campaign.budgetSlots} lease ${campaign.budgetLeaseCoupons}: ${JSON.stringify(result.changes)} then ${result.coupons} coupons`,
        );
        expect(result.violations, JSON.stringify({ campaign, plan })).toEqual([]);
      }),
      { numRuns: 15 },
    );
    await annotate(`campaigns changed while members issued, then sold out exactly: ${seen.join('; ')}`);
  });
});
