import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { SWEEP_PAGES } from '../src/features/checkout/refund-sweep.js';
import { CheckoutDocument, MyCouponsDocument, OrderDocument, RefundOrderDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, gql, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Refunds made outside this server (in Stripe's dashboard, or by any other client of the account)
// are learnt from Stripe's own word: a refund event (charge.refunded, refund.created) has the
// PaymentIntent's refunds listed and recorded, and the reconciler's sweep over the account's refunds
// finds what a lost event missed. Each Stripe refund is recorded once, by its id, whoever learns of
// it first: a refund this server made whose answer was lost is settled as its own, never counted
// beside itself. refundedYen equals what Stripe refunded; a wholly refunded order is REFUNDED and
// gives its coupon back; one order.refunded event per refund.

const WEBHOOK_SECRET = 'whsec_test_0123456789abcdefghijklmnop';
const TENANT = 'found-refunds';

describe('refunds made outside this server', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  const paidOrder = async (member: string, couponId: string | null = null, paymentMethod = 'pm_card_visa') => {
    const input = { amountYen: 2_000, couponId, paymentMethod };
    return (await gqlOk(fetch, CheckoutDocument, { input }, asUser(TENANT, member))).checkout.order!;
  };
  const intentOf = (orderId: string) => stub.intentOf(orderId)!.id;
  const orderRow = async (orderId: string) =>
    (await backend.sql.query('select status, refunded_yen from orders where id = $1', [orderId])).rows[0] as {
      status: string;
      refunded_yen: number;
    };
  const refundRows = async (orderId: string) =>
    (
      await backend.sql.query(
        'select origin, status, amount_yen, provider_refund_id from refunds where order_id = $1 order by created_at',
        [orderId],
      )
    ).rows;
  /** As if PAYMENTS_RECONCILE_AFTER_MS had passed: every pending payment and refund due, and the sweep. */
  const reconcile = async () => {
    await backend.sql.query("update payment_intents set next_attempt_at = now() where status = 'pending'");
    await backend.sql.query("update refunds set next_attempt_at = now() where status = 'pending'");
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    return backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  };
  const violations = async () => checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false);

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET }) });
    stub.webhooks.sendTo(fetch, WEBHOOK_SECRET);
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it("a refund made in Stripe's dashboard is recorded from its events: refundedYen Stripe's, REFUNDED when whole with the coupon given back", async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'dash', 500, ['dash']);
    const order = await paidOrder('dash', coupon!);
    stub.refundInDashboard(intentOf(order.id), 600);
    await stub.webhooks.settled();
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 600 });
    const partly = (await gqlOk(fetch, OrderDocument, { id: order.id }, asUser(TENANT, 'dash'))).order!;
    expect(partly).toMatchObject({ status: 'PAID', refundedYen: 600 });
    stub.refundInDashboard(intentOf(order.id), 900);
    await stub.webhooks.settled();
    expect(await orderRow(order.id)).toEqual({ status: 'REFUNDED', refunded_yen: 1_500 });
    expect((await refundRows(order.id)).map((row) => [row.origin, row.amount_yen])).toEqual([
      ['provider', 600],
      ['provider', 900],
    ]);
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'dash'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
    // Each refund sent charge.refunded and refund.created; every one acted on once, and a repeat changes nothing.
    const event = stub.webhooks.events.at(-1)!;
    expect(event.type).toBe('refund.created');
    const repeat = await stub.webhooks.send(event.payload, stub.webhooks.sign(event.payload));
    expect(await repeat.json()).toEqual({ received: true, repeat: true });
    expect(await violations()).toEqual([]);
  });

  it('events lost on the way: the reconciler’s sweep over the account’s refunds records them, once however often it runs', async () => {
    const order = await paidOrder('lost-events');
    stub.webhooks.mode = 'held';
    stub.refundInDashboard(intentOf(order.id), 300);
    stub.refundInDashboard(intentOf(order.id), 200);
    await stub.webhooks.deliver({ lose: () => true });
    stub.webhooks.mode = 'immediate';
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 0 });
    expect((await reconcile()).foundRefunds).toBe(2);
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 500 });
    expect((await reconcile()).foundRefunds).toBe(0);
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 500 });
    expect(await violations()).toEqual([]);
  });

  it('a refund of this server’s whose answer was lost is settled as its own when its event comes first: counted once, by the resend too', async () => {
    const order = await paidOrder('own-lost');
    stub.webhooks.mode = 'held';
    stub.failNext('refund', 'lost502');
    const headers = { ...asTenantAdmin(TENANT), 'idempotency-key': 'own-lost-1' };
    const first = await gql(fetch, RefundOrderDocument, { input: { orderId: order.id, amountYen: 700 } }, headers);
    expect(first.body.data!.refundOrder.order.refundedYen).toBe(0);
    // The answer was lost; Stripe's events arrive now, and the list names the refund by its metadata.
    await stub.webhooks.deliver();
    stub.webhooks.mode = 'immediate';
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 700 });
    const again = await gql(fetch, RefundOrderDocument, { input: { orderId: order.id, amountYen: 700 } }, headers);
    expect(again.body.data!.refundOrder.order.refundedYen).toBe(700);
    await reconcile();
    expect((await refundRows(order.id)).map((row) => [row.origin, row.status, row.amount_yen])).toEqual([
      ['refund_order', 'succeeded', 700],
    ]);
    expect(stub.refunds.filter((refund) => refund.orderId === order.id)).toHaveLength(1);
    expect(await violations()).toEqual([]);
  });

  it('and when its events are lost too, the sweep settles it as its own before the reconciler asks again with its key', async () => {
    const order = await paidOrder('own-swept');
    stub.webhooks.mode = 'held';
    stub.failNext('refund', 'reset');
    stub.failNext('refund', 'reset');
    await gql(fetch, RefundOrderDocument, { input: { orderId: order.id, amountYen: 400 } }, asTenantAdmin(TENANT));
    await stub.webhooks.deliver({ lose: () => true });
    stub.webhooks.mode = 'immediate';
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 0 });
    // Only the sweep is due: the pending refund's own question waits.
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    expect((await backend.services.checkout.reconcile(reconcileDeps(backend.services)!)).foundRefunds).toBe(1);
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 400 });
    await reconcile();
    expect((await refundRows(order.id)).map((row) => [row.origin, row.status])).toEqual([['refund_order', 'succeeded']]);
    expect(await violations()).toEqual([]);
  });

  it('a refund of a charge whose answer was lost settles the payment first, then the refund', async () => {
    const order = await paidOrder('pay-then-refund', null, 'pm_card_visa__lost502');
    expect(order.status).toBe('PENDING_PAYMENT');
    stub.refundInDashboard(intentOf(order.id), 2_000);
    await stub.webhooks.settled();
    expect(await orderRow(order.id)).toEqual({ status: 'REFUNDED', refunded_yen: 2_000 });
    expect(await violations()).toEqual([]);
  });

  it('a refund of another client’s charge, or an unsigned refund event, records nothing', async () => {
    const order = await paidOrder('others');
    const before = (await readCheckoutTables(backend.sql, TENANT)).refunds.length;
    const forged = JSON.stringify({
      id: 'evt_forged_refund',
      object: 'event',
      type: 'charge.refunded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: 'ch_forged', object: 'charge', payment_intent: intentOf(order.id), amount_refunded: 2_000 } },
    });
    expect((await stub.webhooks.send(forged, null)).status).toBe(400);
    expect((await stub.webhooks.send(forged, stub.webhooks.sign(forged, { secret: 'whsec_not_ours_0123456789' }))).status).toBe(400);
    const foreign = JSON.stringify({
      id: 'evt_foreign_refund',
      object: 'event',
      type: 'refund.created',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: 're_foreign', object: 'refund', payment_intent: 'pi_not_of_this_server', amount: 100 } },
    });
    const answered = await stub.webhooks.send(foreign, stub.webhooks.sign(foreign));
    expect(answered.status).toBe(200);
    expect(await answered.json()).toMatchObject({ received: true, result: 'no refunds listed' });
    expect((await readCheckoutTables(backend.sql, TENANT)).refunds.length).toBe(before);
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 0 });
  });

  it('a sweep that meets more refunds than it reads at once goes on after the last it read, in the next pass', async () => {
    // A backend and a stub of its own, without webhooks: the other tests' sweeps need not read these pages.
    const own = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    const quiet = await createTestBackend({ env: stubPayments(own) });
    try {
      await createTenant(quiet, TENANT, 1_000_000);
      const input = { amountYen: 2_000, paymentMethod: 'pm_card_visa' };
      const order = (await gqlOk(quiet.app.fetch, CheckoutDocument, { input }, asUser(TENANT, 'many'))).checkout.order!;
      for (let i = 0; i < SWEEP_PAGES * 100 + 50; i++) own.refundInDashboard(own.intentOf(order.id)!.id, 1);
      const sweep = () => quiet.services.checkout.reconcile(reconcileDeps(quiet.services)!);
      const resumeAfter = async () => (await quiet.sql.query('select resume_after from refund_sweeps')).rows[0].resume_after;
      // The sweep is due from the start (the migration made it so).
      expect((await sweep()).foundRefunds).toBe(SWEEP_PAGES * 100);
      expect(await resumeAfter()).toMatch(/^re_/);
      // Due again at once: the next pass goes on where this one stopped.
      expect((await sweep()).foundRefunds).toBe(50);
      expect(await resumeAfter()).toBeNull();
      const { rows } = await quiet.sql.query('select status, refunded_yen from orders where id = $1', [order.id]);
      expect(rows[0]).toEqual({ status: 'PAID', refunded_yen: SWEEP_PAGES * 100 + 50 });
      await quiet.sql.query('update refund_sweeps set next_sweep_at = now()');
      expect((await sweep()).foundRefunds).toBe(0);
      expect(checkoutViolations(await readCheckoutTables(quiet.sql, TENANT), own, TENANT, false)).toEqual([]);
    } finally {
      await quiet.close();
      await own.close();
    }
  });
});
