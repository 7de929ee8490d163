import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, MyCouponsDocument, RefundOrderDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// refundOrder: the tenant's admin refunds a PAID order at Stripe, with a key per refund, recorded
// like a charge. refundedYen equals what Stripe refunded; the whole charge refunded is REFUNDED and
// gives the coupon back; a refund beyond what is left reaches nobody; a lost answer is made once.

const TENANT = 'refunds';

describe('refundOrder', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  const paidOrder = async (member: string, couponId: string | null = null) => {
    const input = { amountYen: 2_000, couponId, paymentMethod: 'pm_card_visa' };
    const order = (await gqlOk(fetch, CheckoutDocument, { input }, asUser(TENANT, member))).checkout.order!;
    expect(order.status).toBe('PAID');
    return order;
  };
  const refund = (orderId: string, amountYen?: number, headers: Record<string, string> = asTenantAdmin(TENANT)) =>
    gql(fetch, RefundOrderDocument, { input: { orderId, ...(amountYen === undefined ? {} : { amountYen }) } }, headers);
  const refundsAt = (orderId: string) => stub.refunds.filter((made) => made.orderId === orderId).map((made) => made.amountYen);
  const refundedEvents = async (orderId: string) =>
    (
      await backend.sql.query("select payload from outbox_events where topic = 'order.refunded' and payload->>'orderId' = $1", [orderId])
    ).rows
      .map((row) => row.payload.amountYen as number)
      .sort((a, b) => a - b);

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub) });
    await createTenant(backend, TENANT, 1_000_000);
    await createTenant(backend, 'refunds-other', 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('refunds all that is left: REFUNDED, refundedYen the charge, the coupon given back and good for another order, one order.refunded', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'refund-whole', 500, ['refund-whole']);
    const order = await paidOrder('refund-whole', coupon!);
    const refunded = (await refund(order.id)).body.data!.refundOrder.order;
    expect(refunded).toMatchObject({ status: 'REFUNDED', paidYen: 1_500, refundedYen: 1_500 });
    expect(refundsAt(order.id)).toEqual([1_500]);
    expect(await refundedEvents(order.id)).toEqual([1_500]);
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'refund-whole'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
    expect((await paidOrder('refund-whole', coupon!)).couponId).toBe(coupon);
  });

  it('a partial refund leaves the order PAID; the rest makes it REFUNDED; beyond what is left is BAD_USER_INPUT and reaches nobody', async () => {
    const order = await paidOrder('refund-parts');
    expect((await refund(order.id, 300)).body.data!.refundOrder.order).toMatchObject({ status: 'PAID', refundedYen: 300 });
    const requests = stub.requests.length;
    const beyond = await refund(order.id, 1_701);
    expect(errorCodes(beyond)).toEqual(['BAD_USER_INPUT']);
    expect(beyond.body.errors![0]!.message).toContain('1 to 1700');
    expect(stub.requests.length).toBe(requests);
    expect((await refund(order.id, 1_700)).body.data!.refundOrder.order).toMatchObject({ status: 'REFUNDED', refundedYen: 2_000 });
    expect(errorCodes(await refund(order.id))).toEqual(['BAD_USER_INPUT']);
    expect(refundsAt(order.id)).toEqual([300, 1_700]);
    expect(await refundedEvents(order.id)).toEqual([300, 1_700]);
  });

  it('is the tenant admin’s: a member is FORBIDDEN, another tenant’s order NOT_FOUND, a pending or canceled order BAD_USER_INPUT; nobody called', async () => {
    const order = await paidOrder('refund-access');
    const declined = (
      await gqlOk(
        fetch,
        CheckoutDocument,
        { input: { amountYen: 900, paymentMethod: 'pm_card_chargeDeclined' } },
        asUser(TENANT, 'refund-access'),
      )
    ).checkout.order!;
    const requests = stub.requests.length;
    expect(errorCodes(await refund(order.id, undefined, asUser(TENANT, 'refund-access')))).toEqual(['FORBIDDEN']);
    expect(errorCodes(await refund(order.id, undefined, asTenantAdmin('refunds-other')))).toEqual(['NOT_FOUND']);
    expect(errorCodes(await refund(declined.id))).toEqual(['BAD_USER_INPUT']);
    expect(errorCodes(await refund(order.id, 0))).toEqual(['BAD_USER_INPUT']);
    expect(stub.requests.length).toBe(requests);
  });

  it('a keyed resend is the same refund, made once; a lost answer is made once by the resend, or by the reconciler', async () => {
    const keyed = await paidOrder('refund-keyed');
    const headers = { ...asTenantAdmin(TENANT), 'idempotency-key': 'refund-keyed-1' };
    const first = await refund(keyed.id, 500, headers);
    const again = await refund(keyed.id, 500, headers);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data!.refundOrder.order).toMatchObject({ refundedYen: 500 });
    expect(first.body.data!.refundOrder.order.refundedYen).toBe(500);
    expect(refundsAt(keyed.id)).toEqual([500]);

    const lost = await paidOrder('refund-lost');
    stub.failNext('refund', 'lost502');
    const lostHeaders = { ...asTenantAdmin(TENANT), 'idempotency-key': 'refund-lost-1' };
    expect((await refund(lost.id, 700, lostHeaders)).body.data!.refundOrder.order).toMatchObject({ status: 'PAID', refundedYen: 0 });
    expect(refundsAt(lost.id)).toEqual([700]);
    expect((await refund(lost.id, 700, lostHeaders)).body.data!.refundOrder.order).toMatchObject({ refundedYen: 700 });
    expect(refundsAt(lost.id)).toEqual([700]);

    const reconciled = await paidOrder('refund-reconciled');
    stub.failNext('refund', 'reset');
    stub.failNext('refund', 'reset');
    await refund(reconciled.id, 400);
    await backend.sql.query("update refunds set next_attempt_at = now() where status = 'pending'");
    expect((await backend.services.checkout.reconcile(reconcileDeps(backend.services)!)).refunds).toBeGreaterThan(0);
    const { rows } = await backend.sql.query('select refunded_yen from orders where id = $1', [reconciled.id]);
    expect(rows[0].refunded_yen).toBe(400);
    expect(refundsAt(reconciled.id)).toEqual([400]);
    expect(await refundedEvents(reconciled.id)).toEqual([400]);
  });

  it('past the key lifetime, a refund whose answer was lost is found among the PaymentIntent’s refunds, not made again', async () => {
    const order = await paidOrder('refund-old');
    stub.failNext('refund', 'lost502');
    await refund(order.id, 600);
    await backend.sql.query("update refunds set next_attempt_at = now(), created_at = now() - interval '2 days' where order_id = $1", [
      order.id,
    ]);
    stub.forgetKeys();
    await backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    expect(refundsAt(order.id)).toEqual([600]);
    const { rows } = await backend.sql.query('select refunded_yen from orders where id = $1', [order.id]);
    expect(rows[0].refunded_yen).toBe(600);
  });

  it('refunds released together never pass the charge: one whole refund wins, the others reach nobody', async () => {
    const order = await paidOrder('refund-race');
    const answers = await Promise.all(Array.from({ length: 6 }, () => refund(order.id)));
    const outcomes = answers.map((answer) => answer.body.data?.refundOrder.order.status ?? errorCodes(answer)[0]);
    expect(outcomes.filter((outcome) => outcome === 'REFUNDED')).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome === 'BAD_USER_INPUT')).toHaveLength(5);
    expect(refundsAt(order.id)).toEqual([2_000]);
    const { rows } = await backend.sql.query('select count(*)::int as n from refunds where order_id = $1', [order.id]);
    expect(rows[0].n).toBe(1);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });
});
