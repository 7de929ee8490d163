import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckoutAlgorithm } from '../src/features/checkout/flow.js';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { chargeInsideTransaction, lostAnswerIsDecline, noReconciler } from './naive/checkout.js';
import { FAULT_SETTINGS, runFaultScenario, STUB_SLOW_MS, stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { killDuringCheckout } from './support/checkout-kill.js';
import { duringHeldCall, ONE_TURN } from './support/checkout-turns.js';
import { createTenant, createTestBackend, serveTestBackend, type ServedBackend, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// The scenario of checkout.faults.test.ts with each naive twin of test/naive/checkout.ts standing
// in for the split checkout: the same checks must catch every one of them.

describe.each([
  [
    'the charge inside transaction 1',
    chargeInsideTransaction,
    'a charge whose order was rolled back',
    /is for an order that does not exist/,
  ],
  ['a lost answer taken for a decline', lostAnswerIsDecline, 'a CANCELED order that was charged', /CANCELED order .* was charged/],
  ['no reconciler', noReconciler, 'orders left PENDING_PAYMENT, coupons left HELD', /still PENDING_PAYMENT|still HELD/],
] as [string, CheckoutAlgorithm, string, RegExp][])('the fault scenario against %s', (label, checkout, failure, violation) => {
  let stub: StripeStub;
  let backend: ServedBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY, slowMs: STUB_SLOW_MS });
    backend = await serveTestBackend({ env: stubPayments(stub, FAULT_SETTINGS), algorithms: { checkout } });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it(`fails: ${failure}`, async ({ annotate }) => {
    const tenantId = `naive-${checkout.name.replace(/\W+/g, '-')}`;
    await createTenant(backend, tenantId, 10_000_000);
    const result = await runFaultScenario(backend, stub, {
      tenantId,
      members: 28,
      reconcile: () => backend.services.algorithms.checkout.reconcile(reconcileDeps(backend.services)!),
      maxPasses: 5,
    });
    await annotate(`${label} under faults: ${JSON.stringify({ ...result, violationsSettled: result.violationsSettled.slice(0, 5) })}`);
    expect(result.violationsSettled.filter((found) => violation.test(found)).length).toBeGreaterThan(0);
  });
});

describe('checkout with the charge inside transaction 1, while the provider answers', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: stubPayments(stub, ONE_TURN), algorithms: { checkout: chargeInsideTransaction } });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('fails: it holds the one turn and the one connection, so the other member is turned away', async ({ annotate }) => {
    const result = await duringHeldCall(backend, stub, 'turns-naive');
    await annotate(`charge inside transaction 1, a call held: ${JSON.stringify(result)}`);
    expect(result.otherRead).toEqual(['TRY_AGAIN']);
    expect(result.otherCheckout).toBe('TRY_AGAIN');
    expect(result.inTransaction).toBe(1);
  });
});

// Slow: each run starts a server process of the twin and kills it (test/checkout.kill.test.ts).
describe('checkout killed between its steps, with the naive twins', () => {
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

  it('no reconciler fails: killed before the call, the order stays PENDING_PAYMENT with its coupon held', async ({ annotate }) => {
    const result = await killDuringCheckout(backend, stub, {
      tenantId: 'kill-naive-reconciler',
      point: 'before-call',
      algorithm: 'no-reconciler',
    });
    await annotate(`no reconciler, killed before the call: ${JSON.stringify(result)}`);
    expect(result.afterReconcile).toBe('order PENDING_PAYMENT, coupon held');
    expect(result.violations.filter((found) => /still PENDING_PAYMENT|still HELD/.test(found)).length).toBeGreaterThan(0);
  });

  it('the charge inside transaction 1 fails: killed during the call, the charge stands and its order was rolled back', async ({
    annotate,
  }) => {
    const result = await killDuringCheckout(backend, stub, {
      tenantId: 'kill-naive-inside',
      point: 'during-call',
      algorithm: 'charge-inside',
    });
    await annotate(`charge inside transaction 1, killed during the call: ${JSON.stringify(result)}`);
    expect(result.afterKill).toBe('no order, coupon available');
    expect(result.charges).toBe(1);
    expect(result.violations.filter((found) => /is for an order that does not exist/.test(found)).length).toBeGreaterThan(0);
  });
});
