import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { SAME_FAILURES_SET_ASIDE } from '../src/features/checkout/record.js';
import { CheckoutDocument, MyCouponsDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// The reconciler asks, it does not replay (docs/design.md §11): a payment that named its
// PaymentIntent is looked up by its id; one that did not is sent its create request again only
// while the key is younger than Stripe's 24 hours, and searched for by metadata order_id after,
// never created. A payment that fails the same way pass after pass is set aside, not asked forever.
// test/checkout.naive.test.ts shows a reconciler that creates again after 24 hours charge twice.

const TENANT = 'reconciler';

describe('the reconciler', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const checkout = async (member: string, paymentMethod: string, couponId: string | null = null) =>
    (await gqlOk(backend.app.fetch, CheckoutDocument, { input: { amountYen: 1_100, couponId, paymentMethod } }, asUser(TENANT, member)))
      .checkout;
  const pass = () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  const due = (orderId: string, age = '0 seconds') =>
    backend.sql.query(`update payment_intents set next_attempt_at = now(), created_at = now() - interval '${age}' where order_id = $1`, [
      orderId,
    ]);
  const statusOf = async (orderId: string) =>
    (await backend.sql.query('select status, failure_code from orders where id = $1', [orderId])).rows[0];

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub) });
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('looks a payment that named its PaymentIntent up by its id, and never creates it again', async () => {
    const answer = await checkout('named', 'pm_card_threeDSecure2Required');
    stub.authenticate(stub.intentOf(answer.order!.id)!.id, 'succeed');
    const creates = stub.requests.filter((request) => request.kind === 'create').length;
    const lookups = stub.requests.filter((request) => request.kind === 'lookup').length;
    await due(answer.order!.id);
    await pass();
    expect(await statusOf(answer.order!.id)).toEqual({ status: 'PAID', failure_code: null });
    expect(stub.requests.filter((request) => request.kind === 'create').length).toBe(creates);
    expect(stub.requests.filter((request) => request.kind === 'lookup').length).toBe(lookups + 1);
  });

  it('past the key lifetime, with no id ever learned, finds the payment by metadata order_id and settles it to its one charge', async () => {
    const answer = await checkout('lost-long-ago', 'pm_card_visa__lost502');
    await due(answer.order!.id, '2 days');
    stub.forgetKeys();
    const creates = stub.requests.filter((request) => request.kind === 'create').length;
    await pass();
    expect(await statusOf(answer.order!.id)).toEqual({ status: 'PAID', failure_code: null });
    expect(stub.requests.filter((request) => request.kind === 'create').length).toBe(creates);
    expect(stub.requests.some((request) => request.kind === 'search')).toBe(true);
    expect(stub.charges.filter((charge) => charge.orderId === answer.order!.id)).toHaveLength(1);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });

  it('past the key lifetime, with nothing at Stripe for the order: CANCELED (no_payment_found), the coupon given back', async () => {
    const [coupon] = await issueCoupons(backend, TENANT, 'never-reached', 300, ['never-reached']);
    const answer = await checkout('never-reached', 'pm_card_visa__error500_9', coupon!);
    expect(answer.status).toBe('PENDING');
    await due(answer.order!.id, '2 days');
    await pass();
    expect(await statusOf(answer.order!.id)).toEqual({ status: 'CANCELED', failure_code: 'no_payment_found' });
    const mine = await gqlOk(backend.app.fetch, MyCouponsDocument, {}, asUser(TENANT, 'never-reached'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
  });

  it(`sets a payment aside after ${SAME_FAILURES_SET_ASIDE} answers that failed the same way, and asks no more`, async ({ annotate }) => {
    const answer = await checkout('always-500', 'pm_card_visa__error500_99');
    const asked = () => stub.requests.filter((request) => request.key === `checkout-${answer.order!.id}`).length;
    for (let i = 0; i < SAME_FAILURES_SET_ASIDE + 2; i++) {
      await due(answer.order!.id);
      await pass();
    }
    const { rows } = await backend.sql.query(
      'select set_aside_at is not null as aside, same_failures, last_error from payment_intents where order_id = $1',
      [answer.order!.id],
    );
    await annotate(`after ${SAME_FAILURES_SET_ASIDE + 2} passes: ${JSON.stringify(rows[0])}, ${asked()} requests`);
    expect(rows[0]).toMatchObject({ aside: true, same_failures: SAME_FAILURES_SET_ASIDE });
    expect(asked()).toBe(1 + SAME_FAILURES_SET_ASIDE);
    expect((await pass()).unsettled).toBeGreaterThan(0);
  });
});
