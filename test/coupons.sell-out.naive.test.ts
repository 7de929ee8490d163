import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { naiveBudgetChanger } from './naive/budget-change.js';
import { ownLeaseOnly } from './naive/budget-leases.js';
import { budgetChangeCases, runBudgetRace } from './support/budget-race.js';
import { evenYenSplit } from './naive/budget-split.js';
import { createTestBackend, createTestDatabaseUrl, type TestBackend } from './support/harness.js';
import { runSellOut, sellOutCases, sellOutViolations, type CampaignShape } from './support/sell-out.js';
import type { StandIns } from '../src/services/services.js';

// The properties of coupons.sell-out.test.ts against the naive twins: they must find a campaign
// that refuses BUDGET_EXCEEDED while yen is left, and one whose budget change loses what members
// issued meanwhile.

/** The first case the property fails on, with what broke. */
async function counterexample(standIns: StandIns, shape: CampaignShape): Promise<{ message: string; violations: string[] }> {
  const databaseUrl = await createTestDatabaseUrl();
  const backends: TestBackend[] = [await createTestBackend({ databaseUrl, standIns }), await createTestBackend({ databaseUrl, standIns })];
  let run = 0;
  let violations: string[] = [];
  try {
    const failure = await fc
      .assert(
        fc.asyncProperty(sellOutCases([shape]), async (c) => {
          violations = sellOutViolations(c, await runSellOut(backends, `n${shape.replace(' ', '')}${run++}`, c));
          expect(violations, JSON.stringify(c)).toEqual([]);
        }),
        // The first counterexample is enough: shrinking it would cost a run of members each step.
        { numRuns: 40, endOnFailure: true },
      )
      .then(
        () => null,
        (error: unknown) => (error as Error).message,
      );
    expect(failure).not.toBeNull();
    return { message: failure!.split('\n').slice(0, 3).join(' '), violations };
  } finally {
    for (const backend of backends) await backend.close();
  }
}

describe('the sell-out property against the naive twins', () => {
  it('budget split by yen: a campaign over several slots strands a remainder in each', async ({ annotate }) => {
    const failure = await counterexample({ budgetSplit: evenYenSplit }, 'slots');
    await annotate(`${failure.message}: ${failure.violations.join('; ')}`);
    expect(failure.violations.join('\n')).toMatch(/BUDGET_EXCEEDED answers while yen was left/);
  });

  it("leases only their own process issues from: a refusal while another process's lease has room", async ({ annotate }) => {
    const failure = await counterexample({ budgetLeasing: ownLeaseOnly }, 'leases');
    await annotate(`${failure.message}: ${failure.violations.join('; ')}`);
    expect(failure.violations.join('\n')).toMatch(/BUDGET_EXCEEDED answers while yen was left/);
  });

  it('budget changes that rewrite the slots without their locks: yen issued meanwhile is lost and the budget overspent', async ({
    annotate,
  }) => {
    const databaseUrl = await createTestDatabaseUrl();
    const backends = [
      await createTestBackend({ databaseUrl, standIns: { budgetChanger: naiveBudgetChanger } }),
      await createTestBackend({ databaseUrl, standIns: { budgetChanger: naiveBudgetChanger } }),
    ];
    let run = 0;
    let violations: string[] = [];
    try {
      const failure = await fc
        .assert(
          fc.asyncProperty(budgetChangeCases(['slots', 'leases']), async ({ campaign, plan }) => {
            violations = (await runBudgetRace(backends, `naive-change-${run++}`, campaign, plan)).violations;
            expect(violations, JSON.stringify({ campaign, plan })).toEqual([]);
          }),
          { numRuns: 40, endOnFailure: true },
        )
        .then(
          () => null,
          (error: unknown) => (error as Error).message,
        );
      await annotate(`${failure?.split('\n').slice(0, 3).join(' ')}: ${violations.join('; ')}`);
      expect(failure).not.toBeNull();
      expect(violations.join('\n')).toMatch(/issuedYen \d+ but coupons worth|over a budget of|INTERNAL_SERVER_ERROR/);
    } finally {
      for (const backend of backends) await backend.close();
    }
  });
});
