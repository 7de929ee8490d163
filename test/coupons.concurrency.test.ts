import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { describeRun, REFERENCE_SCENARIO_TIMEOUT_MS, runReferenceScenario } from './support/coupon-run.js';

describe('issueCoupon, the reference scenario: 300 members x 3 campaigns x 2 sends, released together', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  for (const concurrency of [8, 32]) {
    it(
      `holds every invariant at ${concurrency} concurrent clients`,
      async ({ annotate }) => {
        const result = await runReferenceScenario(backend, concurrency);
        await annotate(describeRun(`coupons at ${concurrency} clients`, result));
        expect(result.invariants.violations).toEqual([]);
        expect(result.outcomes['ISSUED']).toBe(600);
        expect(result.invariants.coupons).toBe(600);
        expect(result.invariants.outboxEvents).toBe(600);
        expect(result.outcomes['TRY_AGAIN']).toBeUndefined();
        expect(Object.keys(result.outcomes).sort()).toEqual(['ALREADY_ISSUED', 'BUDGET_EXCEEDED', 'ISSUED', 'MONTHLY_CAP']);
      },
      REFERENCE_SCENARIO_TIMEOUT_MS,
    );
  }
});
