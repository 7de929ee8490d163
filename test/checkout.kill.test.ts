import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_STRIPE_KEY } from './support/checkout-run.js';
import { killDuringCheckout } from './support/checkout-kill.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// A real server process (test/support/checkout-server.ts) killed with SIGKILL in the middle of a
// checkout: between the first commit and the call, during the call, and between the call and the
// second commit. The reconciler then settles the order to exactly one charge, or none. Slow: each
// case starts a server process. The naive twins' runs are in test/checkout.naive.test.ts.

describe('checkout when the server process is killed between its steps', () => {
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
    ['during-call', 'while the call was in flight (the charge made after the process died)'],
    ['before-record', 'after the provider answered, before the second commit'],
  ] as const)('%s: killed %s, the reconciler settles it to one charge', async ([point], { annotate }) => {
    const result = await killDuringCheckout(backend, stub, { tenantId: `kill-${point}`, point, algorithm: 'split' });
    await annotate(`split checkout killed ${point}: ${JSON.stringify(result)}`);
    expect(result.afterKill).toBe('order PENDING_PAYMENT, coupon held');
    expect(result.afterReconcile).toBe('order PAID, coupon redeemed');
    expect(result.charges).toBe(1);
    expect(result.violations).toEqual([]);
  });
});
