import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { issueCouponNaive } from './naive/issue-coupon.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { describeRun, runReferenceScenario } from './support/coupon-run.js';

// The reference scenario of coupons.concurrency.test.ts with the resolver's service swapped for
// the read-check-write version: the same invariant checks must catch it.
vi.mock('../src/coupons/service.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../src/coupons/service.js')>()),
  issueCoupon: issueCouponNaive,
}));

describe('the reference scenario against the naive read-check-write issue', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  for (const concurrency of [8, 32]) {
    it(`fails its invariant checks at ${concurrency} concurrent clients`, async () => {
      const result = await runReferenceScenario(backend, concurrency);
      console.log(describeRun(`naive coupons at ${concurrency} clients`, result));
      expect(result.invariants.violations.length).toBeGreaterThan(0);
    });
  }
});
