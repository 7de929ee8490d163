import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, ConfirmCheckoutDocument, MyCouponsDocument, OrderDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// 3-D Secure, as Japanese card payments require it: a card that asks for authentication answers
// REQUIRES_ACTION with the PaymentIntent's client secret, the order waits PENDING_PAYMENT with its
// coupon held, the customer's browser finishes or fails it (the stub's `authenticate`), and
// confirmCheckout asks Stripe and settles. An authentication not finished within
// PAYMENTS_ACTION_TIMEOUT_MS is canceled at Stripe, and what Stripe answers is recorded.

const TENANT = 'three-d-secure';
const CARD = 'pm_card_threeDSecure2Required';

describe('checkout with a card that asks for 3-D Secure', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  const checkout = (member: string, couponId: string | null = null, headers: Record<string, string> = {}) =>
    gqlOk(
      fetch,
      CheckoutDocument,
      { input: { amountYen: 1_500, couponId, paymentMethod: CARD } },
      { ...asUser(TENANT, member), ...headers },
    );
  const confirm = (member: string, orderId: string) => gql(fetch, ConfirmCheckoutDocument, { input: { orderId } }, asUser(TENANT, member));
  const couponStatus = async (member: string, coupon: string) =>
    (await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, member))).myCoupons.find((c) => c.id === coupon)!.status;
  const reconcile = () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  /** As if PAYMENTS_ACTION_TIMEOUT_MS had passed since the order asked for authentication. */
  const expireAction = (orderId: string) =>
    backend.sql.query("update payment_intents set action_since = now() - interval '1 day', next_attempt_at = now() where order_id = $1", [
      orderId,
    ]);

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub) });
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('answers REQUIRES_ACTION with the client secret; the order waits with its coupon held; finished in the browser, confirmCheckout settles PAID', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'tds-paid', 500, ['tds-paid']);
    const answer = (await checkout('tds-paid', coupon!)).checkout;
    const intent = stub.intentOf(answer.order!.id)!;
    expect(answer).toMatchObject({
      status: 'REQUIRES_ACTION',
      clientSecret: intent.clientSecret,
      order: { status: 'PENDING_PAYMENT', paidYen: 0 },
    });
    expect(await couponStatus('tds-paid', coupon!)).toBe('HELD');
    expect(stub.charges.filter((charge) => charge.orderId === answer.order!.id)).toEqual([]);
    // Not finished yet: still REQUIRES_ACTION, with the secret again.
    const waiting = (await confirm('tds-paid', answer.order!.id)).body.data!.confirmCheckout;
    expect(waiting).toMatchObject({ status: 'REQUIRES_ACTION', clientSecret: intent.clientSecret });
    stub.authenticate(intent.id, 'succeed');
    const confirmed = (await confirm('tds-paid', answer.order!.id)).body.data!.confirmCheckout;
    expect(confirmed).toMatchObject({
      status: 'PAID',
      clientSecret: null,
      order: { status: 'PAID', paidYen: 1_000, paymentIntentId: intent.id },
    });
    expect(await couponStatus('tds-paid', coupon!)).toBe('REDEEMED');
    // A settled order is answered as it stands, without asking again.
    const lookups = stub.requests.filter((request) => request.kind === 'lookup').length;
    expect((await confirm('tds-paid', answer.order!.id)).body.data!.confirmCheckout.status).toBe('PAID');
    expect(stub.requests.filter((request) => request.kind === 'lookup').length).toBe(lookups);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });

  it('a failed authentication: DECLINED with its failureCode, the PaymentIntent canceled at Stripe, the coupon given back', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'tds-failed', 500, ['tds-failed']);
    const answer = (await checkout('tds-failed', coupon!)).checkout;
    const intent = stub.intentOf(answer.order!.id)!;
    stub.authenticate(intent.id, 'fail');
    const confirmed = (await confirm('tds-failed', answer.order!.id)).body.data!.confirmCheckout;
    expect(confirmed).toMatchObject({
      status: 'DECLINED',
      clientSecret: null,
      order: { status: 'CANCELED', paidYen: 0, failureCode: 'payment_intent_authentication_failure' },
    });
    // It cannot succeed later for a closed order: the customer still holds its client secret.
    expect(stub.intentOf(answer.order!.id)!.status).toBe('canceled');
    expect(await couponStatus('tds-failed', coupon!)).toBe('AVAILABLE');
  });

  it("confirmCheckout is the order's member's: another member's order is NOT_FOUND, a tenant admin is FORBIDDEN", async () => {
    const answer = (await checkout('tds-owner')).checkout;
    expect(errorCodes(await confirm('tds-someone-else', answer.order!.id))).toEqual(['NOT_FOUND']);
    expect(errorCodes(await gql(fetch, ConfirmCheckoutDocument, { input: { orderId: answer.order!.id } }, asTenantAdmin(TENANT)))).toEqual([
      'FORBIDDEN',
    ]);
    expect(errorCodes(await confirm('tds-owner', '00000000-0000-4000-8000-000000000000'))).toEqual(['NOT_FOUND']);
  });

  it('confirmCheckout honours Idempotency-Key: a resend replays and asks again, answering the order as it stands', async () => {
    const answer = (await checkout('tds-keyed-confirm')).checkout;
    const headers = { ...asUser(TENANT, 'tds-keyed-confirm'), 'idempotency-key': 'tds-confirm-1' };
    const send = () => gql(fetch, ConfirmCheckoutDocument, { input: { orderId: answer.order!.id } }, headers);
    expect((await send()).body.data!.confirmCheckout.status).toBe('REQUIRES_ACTION');
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'succeed');
    const again = await send();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data!.confirmCheckout).toMatchObject({ status: 'PAID', order: { id: answer.order!.id, status: 'PAID' } });
    const other = await gql(fetch, ConfirmCheckoutDocument, { input: { orderId: '00000000-0000-4000-8000-000000000000' } }, headers);
    expect(errorCodes(other)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
  });

  it('a keyed resend of the checkout looks the PaymentIntent up by its id, never creates it again', async () => {
    const first = (await checkout('tds-resend', null, { 'idempotency-key': 'tds-resend-1' })).checkout;
    const creates = () => stub.requests.filter((request) => request.kind === 'create').length;
    const before = creates();
    const again = (await checkout('tds-resend', null, { 'idempotency-key': 'tds-resend-1' })).checkout;
    expect(again).toMatchObject({ status: 'REQUIRES_ACTION', clientSecret: first.clientSecret, order: { id: first.order!.id } });
    expect(creates()).toBe(before);
  });

  it('an authentication not finished within PAYMENTS_ACTION_TIMEOUT_MS is given up: canceled at Stripe, the order CANCELED, the coupon AVAILABLE', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'tds-abandoned', 500, ['tds-abandoned']);
    const answer = (await checkout('tds-abandoned', coupon!)).checkout;
    await expireAction(answer.order!.id);
    await reconcile();
    const order = (await gqlOk(fetch, OrderDocument, { id: answer.order!.id }, asUser(TENANT, 'tds-abandoned'))).order;
    expect(order).toMatchObject({ status: 'CANCELED', failureCode: 'abandoned', paidYen: 0 });
    expect(stub.intentOf(answer.order!.id)!.status).toBe('canceled');
    expect(await couponStatus('tds-abandoned', coupon!)).toBe('AVAILABLE');
  });

  it('a customer who finished in the last second is PAID: the cancel is refused by Stripe, and its answer read', async () => {
    const answer = (await checkout('tds-last-second')).checkout;
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'succeed');
    await expireAction(answer.order!.id);
    await reconcile();
    const order = (await gqlOk(fetch, OrderDocument, { id: answer.order!.id }, asUser(TENANT, 'tds-last-second'))).order;
    expect(order).toMatchObject({ status: 'PAID', paidYen: 1_500 });
    expect(stub.requests.some((request) => request.kind === 'cancel')).toBe(true);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });

  it('waits on the reconciler no longer than the timeout: a look-up meanwhile leaves it waiting, and counts it on /metrics', async () => {
    const answer = (await checkout('tds-waiting')).checkout;
    await backend.sql.query('update payment_intents set next_attempt_at = now() where order_id = $1', [answer.order!.id]);
    await reconcile();
    const { rows } = await backend.sql.query(
      "select status, provider_status, action_since is not null as asked, next_attempt_at <= action_since + interval '15 minutes' as within from payment_intents where order_id = $1",
      [answer.order!.id],
    );
    expect(rows[0]).toEqual({ status: 'pending', provider_status: 'requires_action', asked: true, within: true });
    const metrics = await (await fetch(new Request('http://test.local/metrics'))).text();
    expect(Number(/^payments_awaiting_customer (\d+)/m.exec(metrics)![1])).toBeGreaterThan(0);
  });
});
