import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { describeRedeemRun, doubleRedeems, runRedeemScenario } from './support/redeem-scenario.js';

// One member's redeems of the same coupons, released together: each coupon is redeemed once.
// coupons.redeem.naive.test.ts runs the same scenario against the read-check-write redeem.

describe('redeemCoupon under concurrency', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  for (const perCoupon of [4, 16]) {
    it(`redeems each coupon exactly once with ${perCoupon} redeems of it released together`, async ({ annotate }) => {
      const result = await runRedeemScenario(backend, { tenantId: `redeem-${perCoupon}`, coupons: 5, perCoupon });
      await annotate(describeRedeemRun(`redeemCoupon, ${perCoupon} per coupon`, result));
      expect(result.failures).toEqual([]);
      expect(doubleRedeems(result)).toEqual([]);
      expect(result.timeDisagreements).toEqual([]);
      expect(result.auditRows).toBe(result.committedAnswers);
      expect(result.committedAnswers).toBe(result.requests);
    });
  }
});
