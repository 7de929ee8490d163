import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, MyCouponsDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { captureLog } from './support/log-capture.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// POST /webhooks/stripe with Stripe's signed events (the stub signs them with the real SDK's
// webhooks.generateTestHeaderString): an outcome arrives without anyone asking, is acted on once
// however often it is delivered and in whatever order, and a delivery that is forged, unsigned,
// stale, oversized or about someone else's order is a clear 4xx or a logged no-op that writes nothing.

const WEBHOOK_SECRET = 'whsec_test_0123456789abcdefghijklmnop';
const TENANT = 'webhooks';
const OTHER = 'webhooks-other';
const CARD = 'pm_card_threeDSecure2Required';

describe('Stripe webhooks', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const log = captureLog('info');
  const fetch = (request: Request) => backend.app.fetch(request);
  const checkout = async (member: string, tenantId = TENANT, couponId: string | null = null) =>
    (await gqlOk(fetch, CheckoutDocument, { input: { amountYen: 1_200, couponId, paymentMethod: CARD } }, asUser(tenantId, member)))
      .checkout;
  /** Everything an event could change, to compare before and after. */
  const written = async () =>
    (
      await backend.sql.query(`select (select json_agg(o order by o.id) from orders o) as orders,
              (select count(*)::int from outbox_events) as events,
              (select json_agg(c order by c.id) from (select id, held_by_order_id, redeemed_at from coupons) c) as coupons,
              (select json_agg(p order by p.order_id) from (select order_id, status, provider_intent_id, set_aside_at from payment_intents) p) as payments`)
    ).rows[0];
  const eventRows = async () => Number((await backend.sql.query('select count(*)::int as n from provider_events')).rows[0].n);

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET }), log: log.logger });
    stub.webhooks.sendTo(fetch, WEBHOOK_SECRET);
    await createTenant(backend, TENANT, 1_000_000);
    await createTenant(backend, OTHER, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('payment_intent.succeeded settles the order PAID once, however many times it is delivered', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'wh-paid', 300, ['wh-paid']);
    const answer = await checkout('wh-paid', TENANT, coupon!);
    await stub.webhooks.settled();
    stub.webhooks.mode = 'held';
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'succeed');
    expect(await stub.webhooks.deliver({ times: 3 })).toEqual([200, 200, 200]);
    const tables = await readCheckoutTables(backend.sql, TENANT);
    expect(tables.orders.find((order) => order.id === answer.order!.id)!.status).toBe('PAID');
    expect(tables.events.get(answer.order!.id)!.get('order.paid')).toBe(1);
    expect(tables.couponRedeemed.get(coupon!)).toBe(1);
    expect(checkoutViolations(tables, stub, TENANT, false)).toEqual([]);
    stub.webhooks.mode = 'immediate';
  });

  it('payment_intent.payment_failed cancels the PaymentIntent at Stripe, then the order, and gives the coupon back', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'wh-failed', 300, ['wh-failed']);
    const answer = await checkout('wh-failed', TENANT, coupon!);
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'fail');
    await stub.webhooks.settled();
    expect(stub.intentOf(answer.order!.id)!.status).toBe('canceled');
    const { rows } = await backend.sql.query('select status, failure_code from orders where id = $1', [answer.order!.id]);
    expect(rows[0]).toEqual({ status: 'CANCELED', failure_code: 'payment_intent_authentication_failure' });
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'wh-failed'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
  });

  it('payment_intent.canceled (canceled in the dashboard) settles the order CANCELED with the reason', async () => {
    const answer = await checkout('wh-canceled');
    stub.cancelInDashboard(stub.intentOf(answer.order!.id)!.id);
    await stub.webhooks.settled();
    const { rows } = await backend.sql.query('select status, failure_code from orders where id = $1', [answer.order!.id]);
    expect(rows[0]).toEqual({ status: 'CANCELED', failure_code: 'requested_by_customer' });
  });

  it('events delivered in reverse, twice, or lost: the first outcome wins and every event acts once', async () => {
    stub.webhooks.mode = 'held';
    const orders = [await checkout('wh-order-1'), await checkout('wh-order-2'), await checkout('wh-order-3')];
    stub.authenticate(stub.intentOf(orders[0]!.order!.id)!.id, 'succeed');
    stub.authenticate(stub.intentOf(orders[1]!.order!.id)!.id, 'fail');
    stub.authenticate(stub.intentOf(orders[2]!.order!.id)!.id, 'succeed');
    const lost = stub.intentOf(orders[2]!.order!.id)!.id;
    await stub.webhooks.deliver({ reversed: true, times: 2, lose: (event) => event.intentId === lost });
    stub.webhooks.mode = 'immediate';
    await stub.webhooks.settled();
    const statuses = async () =>
      (
        await backend.sql.query('select id, status from orders where id = any($1) order by created_at', [orders.map((o) => o.order!.id)])
      ).rows.map((row) => row.status);
    // The third's events were lost: it waits for confirmCheckout or the reconciler, who ask Stripe.
    expect(await statuses()).toEqual(['PAID', 'CANCELED', 'PENDING_PAYMENT']);
    const repeats = stub.webhooks.answers.length;
    await backend.sql.query("update payment_intents set next_attempt_at = now() where status = 'pending'");
    await backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    expect(await statuses()).toEqual(['PAID', 'CANCELED', 'PAID']);
    // The reconciler's PAID brought the lost event's own delivery no more: Stripe's events are not sent again.
    expect(stub.webhooks.answers.length).toBe(repeats);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });

  it('refuses a forged, unsigned or stale event with 400 and writes nothing', async () => {
    const answer = await checkout('wh-forged');
    await stub.webhooks.settled();
    const intent = stub.intentOf(answer.order!.id)!;
    const forged = JSON.stringify({
      id: 'evt_forged0001',
      object: 'event',
      type: 'payment_intent.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { ...JSON.parse(stub.webhooks.events.at(-1)!.payload).data.object, id: intent.id, status: 'succeeded' } },
    });
    const before = { written: await written(), events: await eventRows() };
    const answers = [
      await stub.webhooks.send(forged, stub.webhooks.sign(forged, { secret: 'whsec_someone_elses_secret_0123456789' })),
      await stub.webhooks.send(forged, null),
      await stub.webhooks.send(forged, stub.webhooks.sign(forged, { timestamp: Math.floor(Date.now() / 1000) - 600 })),
      await stub.webhooks.send(forged, 't=1,v1=00'),
      await stub.webhooks.send(`${forged} `, stub.webhooks.sign(forged)),
    ];
    expect(answers.map((response) => response.status)).toEqual([400, 400, 400, 400, 400]);
    expect({ written: await written(), events: await eventRows() }).toEqual(before);
  });

  it('a replayed event is answered 200 and acts no more; a body over MAX_BODY_BYTES is 413', async () => {
    const answer = await checkout('wh-replayed');
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'succeed');
    await stub.webhooks.settled();
    const event = stub.webhooks.events.at(-1)!;
    const before = await written();
    const replayed = await stub.webhooks.send(event.payload, stub.webhooks.sign(event.payload));
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toEqual({ received: true, repeat: true });
    expect(await written()).toEqual(before);
    const huge = `{"id":"evt_huge","padding":"${'a'.repeat(backend.config.server.maxBodyBytes)}"}`;
    expect((await stub.webhooks.send(huge, stub.webhooks.sign(huge))).status).toBe(413);
  });

  it("an event for another tenant's order, or whose PaymentIntent disagrees with its order, is a logged no-op that writes nothing", async () => {
    const theirs = await checkout('wh-theirs', OTHER);
    const mine = await checkout('wh-mine');
    await stub.webhooks.settled();
    /** The PaymentIntent of `orderId` as Stripe's events describe it, succeeded, with what the test changes. */
    const object = (orderId: string, overrides: Record<string, unknown>) => ({
      ...JSON.parse(stub.webhooks.events.find((event) => event.intentId === stub.intentOf(orderId)!.id)!.payload).data.object,
      status: 'succeeded',
      ...overrides,
    });
    const signed = async (id: string, dataObject: unknown) => {
      const payload = JSON.stringify({
        id,
        object: 'event',
        type: 'payment_intent.succeeded',
        created: Math.floor(Date.now() / 1000),
        data: { object: dataObject },
      });
      return stub.webhooks.send(payload, stub.webhooks.sign(payload));
    };
    const before = await written();
    const answers = [
      await signed('evt_other_tenant', object(theirs.order!.id, { metadata: { order_id: theirs.order!.id, tenant_id: TENANT } })),
      await signed('evt_amount', object(mine.order!.id, { amount: 1 })),
      await signed('evt_currency', object(mine.order!.id, { currency: 'usd' })),
      await signed('evt_intent', object(mine.order!.id, { id: stub.intentOf(theirs.order!.id)!.id })),
      await signed(
        'evt_no_order',
        object(mine.order!.id, { metadata: { order_id: '00000000-0000-4000-8000-000000000000', tenant_id: TENANT } }),
      ),
    ];
    expect(answers.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
    expect(await written()).toEqual(before);
    const logged = log.lines.filter((line) => line['msg'] === 'payment: a PaymentIntent that does not match its order settles nothing');
    expect(logged.length).toBeGreaterThanOrEqual(3);
    const metrics = await (await fetch(new Request('http://test.local/metrics'))).text();
    expect(metrics).toMatch(/payment_answers_refused_total\{source="webhook"\} [3-9]/);
  });

  it('without STRIPE_WEBHOOK_SECRET the endpoint answers 404 and reads nothing', async () => {
    const plain = await createTestBackend({ env: stubPayments(stub) });
    try {
      const response = await plain.app.fetch(new Request('http://test.local/webhooks/stripe', { method: 'POST', body: '{}' }));
      expect(response.status).toBe(404);
    } finally {
      await plain.close();
    }
  });
});
