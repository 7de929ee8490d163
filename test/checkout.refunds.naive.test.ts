import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument } from './generated/graphql.js';
import { noRefundSweep, refundsFromEventBody } from './naive/checkout.js';
import { checkoutViolations, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { runRefundRace } from './support/refund-race.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// The naive twins of learning of refunds made outside this server (test/naive/checkout.ts) against
// the checks of test/checkout.refunds.concurrency.test.ts and test/checkout.provider-refunds.test.ts:
// each must be caught.

const SECRET = 'whsec_test_refund_naive_0123456789a';

describe('refunds counted from the event’s charge', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({
      env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: SECRET }),
      standIns: { checkout: () => refundsFromEventBody },
    });
    stub.webhooks.sendTo((request) => backend.app.fetch(request), SECRET);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('fails the race: an order.refunded event per delivery, not per refund, and refunds not recorded by their id', async ({ annotate }) => {
    const result = await runRefundRace(backend, stub, 'refund-race-naive', 4);
    await annotate(`refunds from the event's body: ${JSON.stringify({ ...result, violations: result.violations.slice(0, 6) })}`);
    expect(result.violations.filter((found) => /yen refunded, the provider|order\.refunded events/.test(found)).length).toBeGreaterThan(0);
  });
});

describe('no sweep of the refunds', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub), standIns: { checkout: () => noRefundSweep } });
    await createTenant(backend, 'no-sweep', 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('fails: a refund made in the dashboard whose events never arrive stays unknown after the reconciler ran', async ({ annotate }) => {
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_visa' };
    const order = (await gqlOk(backend.app.fetch, CheckoutDocument, { input }, asUser('no-sweep', 'buyer'))).checkout.order!;
    stub.refundInDashboard(stub.intentOf(order.id)!.id, 1_000);
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    await backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    const violations = checkoutViolations(await readCheckoutTables(backend.sql, 'no-sweep'), stub, 'no-sweep', true);
    await annotate(`no sweep: ${JSON.stringify(violations)}`);
    expect(violations.filter((found) => /at the provider is recorded \[\]/.test(found))).toHaveLength(1);
  });
});
