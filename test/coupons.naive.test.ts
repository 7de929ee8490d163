import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { naiveIssuer } from './naive/issue-coupon.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { describeRun, REFERENCE_SCENARIO_TIMEOUT_MS, runReferenceScenario } from './support/coupon-run.js';

// The reference scenario of coupons.concurrency.test.ts with the server's coupon issuer swapped
// for the read-check-write version: the same invariant checks must catch it.

describe('the reference scenario against the naive read-check-write issue', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ standIns: { couponIssuer: naiveIssuer } });
  });
  afterAll(async () => {
    await backend.close();
  });

  for (const concurrency of [8, 32]) {
    it(
      `fails its invariant checks at ${concurrency} concurrent clients`,
      async ({ annotate }) => {
        const result = await runReferenceScenario(backend, concurrency);
        await annotate(describeRun(`naive coupons at ${concurrency} clients`, result));
        expect(result.invariants.violations.length).toBeGreaterThan(0);
      },
      REFERENCE_SCENARIO_TIMEOUT_MS,
    );
  }
});
