import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ownLeaseOnly } from './naive/budget-leases.js';
import { evenYenSplit } from './naive/budget-split.js';
import { createTestBackend, createTestDatabaseUrl, type TestBackend } from './support/harness.js';
import { runSellOut, sellOutCases, sellOutViolations, type CampaignShape } from './support/sell-out.js';
import type { Algorithms } from '../src/services/services.js';

// The property of coupons.sell-out.test.ts against the naive twins: it must find a campaign that
// refuses BUDGET_EXCEEDED while yen is left.

/** The first case the property fails on, with what broke. */
async function counterexample(standIns: Partial<Algorithms>, shape: CampaignShape): Promise<{ message: string; violations: string[] }> {
  const databaseUrl = await createTestDatabaseUrl();
  const backends: TestBackend[] = [
    await createTestBackend({ databaseUrl, algorithms: standIns }),
    await createTestBackend({ databaseUrl, algorithms: standIns }),
  ];
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
});
