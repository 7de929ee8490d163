import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, createTestDatabaseUrl, type TestBackend } from './support/harness.js';
import { withoutRoleTimeouts } from './support/coupon-run.js';
import { RACE_DISCOUNT_YEN, RACE_PLAN, runBudgetRace } from './support/budget-race.js';

// A campaign's budget raised and lowered by its admin while 300 members issue, released together
// over real HTTP on three backends of one database (the one statement, the batched one statement,
// the transaction path; each a lease holder of its own), with 1, 16 and 64 budget slots and with
// leases. A watcher reads the campaign in one snapshot after another meanwhile; then a last change
// and a second wave that must sell out exactly at its figure. test/coupons.budget-change.naive.test.ts
// runs the same against the change that rewrites slots without their locks.

const DISCOUNT_YEN = RACE_DISCOUNT_YEN;

const SHAPES = [
  { name: '1 slot', budgetSlots: 1, budgetLeaseCoupons: 0 },
  { name: '16 slots', budgetSlots: 16, budgetLeaseCoupons: 0 },
  { name: '64 slots', budgetSlots: 64, budgetLeaseCoupons: 0 },
  { name: 'leases of 10 coupons', budgetSlots: 1, budgetLeaseCoupons: 10 },
];

describe('changeCampaignBudget while members issue', () => {
  let backends: TestBackend[];
  beforeAll(async () => {
    const databaseUrl = await createTestDatabaseUrl();
    backends = [
      await createTestBackend({ databaseUrl }),
      await createTestBackend({ databaseUrl, env: { COUPON_ISSUE_BATCH_MAX: '32' } }),
      await createTestBackend({ databaseUrl: withoutRoleTimeouts(databaseUrl) }),
    ];
  });
  afterAll(async () => {
    for (const backend of backends) await backend.close();
  });

  for (const shape of SHAPES) {
    it(`${shape.name}: never past the budget in force, every answer true to the tables, then sold out exactly at the last figure`, async ({
      annotate,
    }) => {
      const campaign = { discountYen: DISCOUNT_YEN, budgetYen: 100 * DISCOUNT_YEN + 50, ...shape };
      const result = await runBudgetRace(backends, `race-${shape.name.replace(/\W+/g, '-')}`, campaign, RACE_PLAN);
      await annotate(
        `${shape.name}: first wave ${JSON.stringify(result.firstWave)}, changes ${JSON.stringify(result.changes)}, ` +
          `second wave ${JSON.stringify(result.secondWave)}, ${result.coupons} coupons, ${result.snapshots} snapshots watched`,
      );
      expect(result.violations).toEqual([]);
      expect(result.snapshots).toBeGreaterThan(0);
      expect(result.changes['CHANGED']).toBeGreaterThanOrEqual(3);
    });
  }
});
