import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckoutSteps } from '../src/features/checkout/checkout.js';
import { splitCheckout, type CheckoutAlgorithm } from '../src/features/checkout/flow.js';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument } from './generated/graphql.js';
import {
  cancelWithoutReading,
  chargeInsideTransaction,
  lostAnswerIsDecline,
  noReconciler,
  recreateAfterKeyLifetime,
  unverifiedWebhook,
} from './naive/checkout.js';
import {
  checkoutViolations,
  FAULT_SETTINGS,
  readCheckoutTables,
  runFaultScenario,
  STUB_SLOW_MS,
  stubPayments,
  TEST_STRIPE_KEY,
} from './support/checkout-run.js';
import { killDuringCheckout } from './support/checkout-kill.js';
import { duringHeldCall, ONE_TURN } from './support/checkout-turns.js';
import {
  asUser,
  createTenant,
  createTestBackend,
  gqlOk,
  serveTestBackend,
  type ServedBackend,
  type TestBackend,
} from './support/harness.js';
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
  ['a lost answer taken for a decline', () => lostAnswerIsDecline, 'a CANCELED order that was charged', /CANCELED order .* was charged/],
  ['no reconciler', () => noReconciler, 'orders left PENDING_PAYMENT, coupons left HELD', /still PENDING_PAYMENT|still HELD/],
] as [string, CheckoutSteps, string, RegExp][])('the fault scenario against %s', (label, checkout, failure, violation) => {
  let stub: StripeStub;
  let backend: ServedBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY, slowMs: STUB_SLOW_MS });
    backend = await serveTestBackend({ env: stubPayments(stub, FAULT_SETTINGS), standIns: { checkout } });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it(`fails: ${failure}`, async ({ annotate }) => {
    const tenantId = `naive-${label.replace(/\W+/g, '-')}`;
    await createTenant(backend, tenantId, 10_000_000);
    const result = await runFaultScenario(backend, stub, {
      tenantId,
      members: 28,
      reconcile: () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!),
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
    backend = await createTestBackend({ env: stubPayments(stub, ONE_TURN), standIns: { checkout: chargeInsideTransaction } });
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

/** A backend of `checkout` on a stub of its own, webhooks sent to it, and the scenario's tenant. */
async function twinBackend(checkout: CheckoutAlgorithm, tenantId: string) {
  const stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
  const backend = await createTestBackend({
    env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: NAIVE_WEBHOOK_SECRET }),
    standIns: { checkout: () => checkout },
  });
  stub.webhooks.sendTo((request) => backend.app.fetch(request), NAIVE_WEBHOOK_SECRET);
  await createTenant(backend, tenantId, 1_000_000);
  const checkoutWith = async (member: string, paymentMethod: string) =>
    (await gqlOk(backend.app.fetch, CheckoutDocument, { input: { amountYen: 1_200, paymentMethod } }, asUser(tenantId, member))).checkout;
  const reconcile = () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  const violations = async () => checkoutViolations(await readCheckoutTables(backend.sql, tenantId), stub, tenantId, false);
  return { stub, backend, checkoutWith, reconcile, violations, close: async () => (await backend.close(), await stub.close()) };
}

const NAIVE_WEBHOOK_SECRET = 'whsec_test_naive_0123456789abcdef';

describe('a webhook settled from its unverified body', () => {
  it('fails: a forged payment_intent.succeeded pays an order nobody paid', async ({ annotate }) => {
    for (const [checkout, expectation] of [
      [splitCheckout, 'holds'],
      [unverifiedWebhook, 'fails'],
    ] as const) {
      const twin = await twinBackend(checkout, 'naive-webhook');
      try {
        const answer = await twin.checkoutWith('forger', 'pm_card_threeDSecure2Required');
        await twin.stub.webhooks.settled();
        const requiresAction = JSON.parse(twin.stub.webhooks.events.at(-1)!.payload);
        const forged = JSON.stringify({
          ...requiresAction,
          id: 'evt_forged',
          type: 'payment_intent.succeeded',
          data: { object: { ...requiresAction.data.object, status: 'succeeded' } },
        });
        const response = await twin.stub.webhooks.send(forged, null);
        const violations = await twin.violations();
        await annotate(`${checkout.name}: forged event answered ${response.status}; ${JSON.stringify(violations)}`);
        if (expectation === 'holds') expect(violations).toEqual([]);
        else expect(violations.filter((found) => found.includes(`PAID order ${answer.order!.id} has charges []`))).toHaveLength(1);
      } finally {
        await twin.close();
      }
    }
  });
});

describe('a timeout that cancels without reading the answer', () => {
  it('fails: a customer who finished in the last second is charged, and the order CANCELED', async ({ annotate }) => {
    const twin = await twinBackend(cancelWithoutReading, 'naive-abandon');
    try {
      const answer = await twin.checkoutWith('last-second', 'pm_card_threeDSecure2Required');
      twin.stub.webhooks.sendTo(async () => new Response(null, { status: 503 }), NAIVE_WEBHOOK_SECRET);
      twin.stub.authenticate(twin.stub.intentOf(answer.order!.id)!.id, 'succeed');
      await twin.stub.webhooks.settled();
      await twin.backend.sql.query(
        "update payment_intents set action_since = now() - interval '1 day', next_attempt_at = now() where order_id = $1",
        [answer.order!.id],
      );
      await twin.reconcile();
      const violations = await twin.violations();
      await annotate(`cancel without reading: ${JSON.stringify(violations)}`);
      expect(violations.filter((found) => /CANCELED order .* was charged/.test(found))).toHaveLength(1);
    } finally {
      await twin.close();
    }
  });
});

describe('a reconciler that creates again after 24 hours', () => {
  it('fails: after Stripe forgot the key, the same request is a second charge', async ({ annotate }) => {
    const twin = await twinBackend(recreateAfterKeyLifetime, 'naive-recreate');
    try {
      // Its events lost too: nothing but the reconciler learns the outcome.
      twin.stub.webhooks.sendTo(async () => new Response(null, { status: 503 }), NAIVE_WEBHOOK_SECRET);
      const answer = await twin.checkoutWith('lost', 'pm_card_visa__lost502');
      await twin.backend.sql.query(
        "update payment_intents set created_at = now() - interval '2 days', next_attempt_at = now() where order_id = $1",
        [answer.order!.id],
      );
      twin.stub.forgetKeys();
      await twin.reconcile();
      const charges = twin.stub.charges.filter((charge) => charge.orderId === answer.order!.id);
      const violations = await twin.violations();
      await annotate(`re-created after 24 hours: ${charges.length} charges; ${JSON.stringify(violations)}`);
      expect(charges).toHaveLength(2);
      expect(violations.length).toBeGreaterThan(0);
    } finally {
      await twin.close();
    }
  });
});
