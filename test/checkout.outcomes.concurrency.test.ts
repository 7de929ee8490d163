import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, ConfirmCheckoutDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, gql, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Every source of an outcome at once, each many times: Stripe's webhooks (every event three
// times, in reverse), confirmCheckout twice per order, two reconciler passes, and the abandonment
// of every authentication (its PAYMENTS_ACTION_TIMEOUT_MS made past), all released together. The
// first outcome wins, nothing is written twice, every event acts once, and no order is CANCELED
// whose charge stands: counted with SQL and the stub's ledger.

const TENANT = 'outcomes';
const SECRET = 'whsec_test_outcomes_0123456789abcdef';
const ORDERS = 12;

describe('outcomes arriving from every side at once', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: SECRET }) });
    stub.webhooks.sendTo((request) => backend.app.fetch(request), SECRET);
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('settle each order once, by the first outcome, whatever the order of arrival', async ({ annotate }) => {
    const fetch = (request: Request) => backend.app.fetch(request);
    const members = Array.from({ length: ORDERS }, (_, i) => `buyer-${i}`);
    const coupons = await issueCoupons(backend, TENANT, 'outcomes', 200, members);
    stub.webhooks.mode = 'held';
    const orders: string[] = [];
    for (const [i, member] of members.entries()) {
      const input = { amountYen: 1_000, couponId: coupons[i]!, paymentMethod: 'pm_card_threeDSecure2Required' };
      orders.push((await gqlOk(fetch, CheckoutDocument, { input }, asUser(TENANT, member))).checkout.order!.id);
    }
    // A third pays, a third fails, a third never finishes.
    orders.forEach((orderId, i) => {
      if (i % 3 !== 2) stub.authenticate(stub.intentOf(orderId)!.id, i % 3 === 0 ? 'succeed' : 'fail');
    });
    await backend.sql.query(
      "update payment_intents set action_since = now() - interval '1 day', next_attempt_at = now() where tenant_id = $1",
      [TENANT],
    );
    const reconcile = () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    const confirm = (i: number) => gql(fetch, ConfirmCheckoutDocument, { input: { orderId: orders[i]! } }, asUser(TENANT, members[i]!));
    const released = await Promise.allSettled([
      stub.webhooks.deliver({ times: 3, reversed: true }),
      ...orders.flatMap((_, i) => [confirm(i), confirm(i)]),
      reconcile(),
      reconcile(),
    ]);
    expect(released.filter((result) => result.status === 'rejected')).toEqual([]);
    stub.webhooks.mode = 'immediate';
    // What a pass left (a confirm that met a cancel in flight, say) the next pass settles.
    await backend.sql.query("update payment_intents set next_attempt_at = now() where tenant_id = $1 and status = 'pending'", [TENANT]);
    await reconcile();
    await stub.webhooks.deliver();
    const tables = await readCheckoutTables(backend.sql, TENANT);
    const statuses = orders.map((orderId) => tables.orders.find((order) => order.id === orderId)!.status);
    const events = await backend.sql.query<{ n: number; handled: number; distinct: number }>(
      'select count(*)::int as n, count(handled_at)::int as handled, count(distinct event_id)::int as distinct from provider_events',
    );
    await annotate(
      `statuses: ${JSON.stringify(statuses)}; webhook deliveries ${stub.webhooks.answers.length}; events ${JSON.stringify(events.rows[0])}`,
    );
    expect(statuses).toEqual(orders.map((_, i) => (i % 3 === 0 ? 'PAID' : 'CANCELED')));
    expect(checkoutViolations(tables, stub, TENANT, true)).toEqual([]);
    expect(events.rows[0]).toEqual({
      n: stub.webhooks.events.length,
      handled: stub.webhooks.events.length,
      distinct: stub.webhooks.events.length,
    });
    expect(stub.webhooks.answers.every((answer) => answer.status === 200 || answer.status === 409)).toBe(true);
  });
});
