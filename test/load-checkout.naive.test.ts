import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noReconciler } from './naive/checkout.js';
import { DEFAULT_CARDS } from './load/scenarios/checkout.js';
import { QUICK_RECONCILER, runCheckoutLoad } from './support/checkout-load.js';
import { stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// The run of test/load-checkout.test.ts with the naive twin that has no reconciler standing in
// for the split checkout: the load tool's SQL check must catch it.

describe('npm run load --scenario checkout against the checkout without a reconciler', () => {
  let stub: StripeStub;
  let backend: ServedBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await serveTestBackend({ env: stubPayments(stub, QUICK_RECONCILER), standIns: { checkout: () => noReconciler } });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('fails: what a lost answer left PENDING_PAYMENT stays so, its coupon held', async ({ annotate }) => {
    const cards = { ...DEFAULT_CARDS, others: { pm_card_visa__lost502: 0.3 } };
    // The split checkout settles within a second here; the twin is given a few.
    const result = await runCheckoutLoad(backend, 'naive', { cards, reconcileWaitMs: 3_000 });
    await annotate(`no reconciler: ${JSON.stringify(result.checks)}`);
    expect(result.violations!.join('\n')).toMatch(/\d+ orders still PENDING_PAYMENT/);
  });
});
