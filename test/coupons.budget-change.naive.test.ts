import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { naiveBudgetChanger } from './naive/budget-change.js';
import { createTestBackend, createTestDatabaseUrl, type TestBackend } from './support/harness.js';
import { RACE_PLAN, runBudgetRace } from './support/budget-race.js';

// The run of coupons.budget-change.concurrency.test.ts against the change that reads the slots
// without their locks and writes them back whole (test/naive/budget-change.ts): the yen of issues
// that committed in between is lost from the slots, and the campaign issues past its budget (or a
// change fails outright on a row rewritten under it).

describe('changeCampaignBudget, naive: slots rewritten without their locks', () => {
  let backends: TestBackend[];
  beforeAll(async () => {
    const databaseUrl = await createTestDatabaseUrl();
    const standIns = { budgetChanger: naiveBudgetChanger };
    backends = [await createTestBackend({ databaseUrl, standIns }), await createTestBackend({ databaseUrl, standIns })];
  });
  afterAll(async () => {
    for (const backend of backends) await backend.close();
  });

  for (const shape of [
    { name: '16 slots', budgetSlots: 16, budgetLeaseCoupons: 0 },
    { name: 'leases of 10 coupons', budgetSlots: 1, budgetLeaseCoupons: 10 },
  ]) {
    it(`${shape.name}: loses issued yen and issues past the budget`, async ({ annotate }) => {
      const campaign = { discountYen: 100, budgetYen: 10_050, ...shape };
      const result = await runBudgetRace(backends, `naive-${shape.name.replace(/\W+/g, '-')}`, campaign, RACE_PLAN);
      await annotate(`naive, ${shape.name}: ${result.coupons} coupons; ${result.violations.join('; ')}`);
      // Lost yen and overspent budgets, or a change that failed outright on what it found rewritten under it.
      expect(result.violations.join('\n')).toMatch(/issuedYen \d+ but coupons worth|over a budget of|INTERNAL_SERVER_ERROR/);
    });
  }
});
