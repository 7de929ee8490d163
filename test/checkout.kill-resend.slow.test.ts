import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_STRIPE_KEY } from './support/checkout-run.js';
import { killDuringCheckout } from './support/checkout-kill.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// As test/checkout.kill.test.ts, but what settles the order is the client: it resends the same
// checkout with the same Idempotency-Key to a server process started afresh, and gets the same
// order and its one charge. Slow: each case starts two server processes.

describe('checkout when the server process is killed between its steps, then resent with its key', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: { STRIPE_SECRET_KEY: TEST_STRIPE_KEY, STRIPE_API_URL: stub.url } });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it.for([
    ['before-call', 'after the first commit, before the call reached the provider'],
    ['during-call', 'while the call was in flight'],
    ['before-record', 'after the provider answered, before the second commit'],
  ] as const)(
    '%s: killed %s, a resend with the same key to a restarted server is the same order and one charge',
    async ([point], { annotate }) => {
      const result = await killDuringCheckout(backend, stub, { tenantId: `kill-resend-${point}`, point, algorithm: 'split', resend: true });
      await annotate(`split checkout killed ${point}, then resent with its key: ${JSON.stringify(result)}`);
      expect(result.resent).toEqual({ status: 'PAID', sameOrder: true });
      expect(result.afterReconcile).toBe('order PAID, coupon redeemed');
      expect(result.charges).toBe(1);
      expect(result.violations).toEqual([]);
    },
  );
});
