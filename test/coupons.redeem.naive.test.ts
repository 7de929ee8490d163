import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { naiveRedeemer } from './naive/redeem-coupon.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { describeRedeemRun, doubleRedeems, runRedeemScenario } from './support/redeem-scenario.js';

// The scenario of coupons.redeem.concurrency.test.ts with the read-check-write redeem standing in
// for the conditional UPDATE: the same checks must catch it.

describe('the redeem scenario against the naive read-check-write redeem', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ standIns: { couponRedeemer: naiveRedeemer } });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('fails: some coupon is redeemed twice, with two events and two times', async ({ annotate }) => {
    const result = await runRedeemScenario(backend, { tenantId: 'redeem-naive', coupons: 5, perCoupon: 16 });
    await annotate(describeRedeemRun('naive redeem, 16 per coupon', result));
    expect(doubleRedeems(result).length).toBeGreaterThan(0);
    expect(result.timeDisagreements.length).toBeGreaterThan(0);
  });
});
