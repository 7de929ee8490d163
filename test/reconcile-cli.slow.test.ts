import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckoutDocument, MyCouponsDocument } from './generated/graphql.js';
import { issueCoupons, stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, gql, gqlOk, type TestBackend } from './support/harness.js';
import { runScript } from './support/scripts.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// `npm run reconcile` as an operator runs it, on payments set aside for an operator: the report lists
// them and exits 1; `--settle` records what the operator found at the provider, through the same
// statements as transaction 2 (the first writer wins), says what it changed, refuses a PaymentIntent
// another order holds, and gives a canceled order's coupon back.

const TENANT = 'operator';

describe('npm run reconcile: payments that wait for an operator', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: stubPayments(stub) });
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  const reconcile = (...args: string[]) =>
    runScript('src/entry/cli/reconcile.ts', { DATABASE_URL: backend.databaseUrl, LOG_LEVEL: 'warn' }, args);
  /** A checkout whose outcome stays unknown, set aside as the reconciler sets aside what fails the same way for a day: only an operator settles it now. */
  const abandoned = async (member: string, paymentMethod: string) => {
    const [coupon] = await issueCoupons(backend, TENANT, `abandoned-${member}`, 300, [member]);
    const reply = await gql(
      backend.app.fetch,
      CheckoutDocument,
      { input: { amountYen: 1_000, couponId: coupon, paymentMethod } },
      asUser(TENANT, member),
    );
    const answer = reply.body.data!.checkout;
    expect(answer.status).toBe('PENDING');
    await backend.sql.query("update payment_intents set set_aside_at = now(), last_error = 'api_error HTTP 500' where order_id = $1", [
      answer.order!.id,
    ]);
    return { orderId: answer.order!.id, coupon: coupon! };
  };
  const couponStatus = async (member: string, coupon: string) =>
    (await gqlOk(backend.app.fetch, MyCouponsDocument, {}, asUser(TENANT, member))).myCoupons.find((c) => c.id === coupon)!.status;

  it('lists them and exits 1; --settle canceled gives the coupon back, --settle paid records the charge the dashboard shows', async () => {
    // A 5xx before anything executed, on every call: no charge exists.
    const never = await abandoned('never-charged', 'pm_card_visa__error500_9');
    // The charge was made, its answer lost.
    const lost = await abandoned('answer-lost', 'pm_card_visa__lost502_9');
    const report = await reconcile('--tenant', TENANT);
    expect(report.output).toContain('payments set aside for an operator (find each at the provider by metadata order_id): 2');
    expect(report.output).toContain(never.orderId);
    expect(report.code).toBe(1);

    const canceled = await reconcile('--tenant', TENANT, '--settle', never.orderId, 'canceled');
    expect(canceled.output).toContain(
      `order ${never.orderId}: PENDING_PAYMENT -> CANCELED (operator_found_no_charge), coupon ${never.coupon} given back`,
    );
    expect(canceled.code).toBe(0);
    expect(await couponStatus('never-charged', never.coupon)).toBe('AVAILABLE');

    const charge = stub.charges.find((c) => c.orderId === lost.orderId)!;
    const paid = await reconcile('--tenant', TENANT, '--settle', lost.orderId, 'paid', charge.intentId);
    expect(paid.output).toContain(`order ${lost.orderId}: PENDING_PAYMENT -> PAID with ${charge.intentId}, coupon ${lost.coupon} redeemed`);
    expect(paid.code).toBe(0);
    expect(await couponStatus('answer-lost', lost.coupon)).toBe('REDEEMED');
    const { rows } = await backend.sql.query(
      "select topic, count(*)::int as n from outbox_events where payload->>'orderId' = $1 group by topic",
      [lost.orderId],
    );
    expect(Object.fromEntries(rows.map((row) => [row.topic, row.n]))).toMatchObject({ 'order.paid': 1 });

    // The first writer wins: a second finding changes nothing, and says so.
    const again = await reconcile('--tenant', TENANT, '--settle', lost.orderId, 'canceled');
    expect(again.output).toContain(`order ${lost.orderId}: PAID (it was settled before; nothing changed)`);
    expect(again.code).toBe(1);
    // Paid again with its own PaymentIntent: nothing changes, and it says so.
    const twice = await reconcile('--tenant', TENANT, '--settle', lost.orderId, 'paid', charge.intentId);
    expect(twice.output).toContain(`order ${lost.orderId}: PAID (it was settled before; nothing changed)`);
    expect(twice.code).toBe(1);
    expect((await reconcile('--tenant', TENANT)).code).toBe(0);
  });

  it('refuses a PaymentIntent another order holds, and an unknown tenant, changing nothing', async () => {
    const pending = await abandoned('wants-another', 'pm_card_visa__error500_9');
    const paid = await gqlOk(
      backend.app.fetch,
      CheckoutDocument,
      { input: { amountYen: 900, paymentMethod: 'pm_card_visa' } },
      asUser(TENANT, 'holder'),
    );
    const held = paid.checkout.order!.paymentIntentId!;
    const refused = await reconcile('--tenant', TENANT, '--settle', pending.orderId, 'paid', held);
    expect(refused.output).toContain(`refused: ${held} already settles order ${paid.checkout.order!.id}`);
    expect(refused.code).toBe(2);
    const { rows } = await backend.sql.query('select status from orders where id = $1', [pending.orderId]);
    expect(rows[0].status).toBe('PENDING_PAYMENT');
    const unknownTenant = await reconcile('--tenant', 'no-such-tenant');
    expect(unknownTenant.output).toContain('no tenant no-such-tenant');
    expect(unknownTenant.output).not.toContain('ledger OK');
    expect(unknownTenant.code).toBe(2);
    const unknownSettle = await reconcile('--tenant', 'no-such-tenant', '--settle', pending.orderId, 'canceled');
    expect(unknownSettle.output).toContain('no tenant no-such-tenant');
    expect(unknownSettle.code).toBe(2);
    await reconcile('--tenant', TENANT, '--settle', pending.orderId, 'canceled');
  });

  it('refuses a settlement it cannot read, with its usage, before opening the database', async () => {
    const missingIntent = await reconcile('--tenant', TENANT, '--settle', '00000000-0000-4000-8000-000000000000', 'paid');
    expect(missingIntent.code).toBe(2);
    expect(missingIntent.output).toMatch(/takes "paid pi_…" .* or "canceled"[\s\S]*usage: npm run reconcile/);
    const noTenant = await reconcile('--settle', '00000000-0000-4000-8000-000000000000', 'canceled');
    expect(noTenant.output).toContain('--settle needs --tenant ID');
    expect(noTenant.code).toBe(2);
  });
});
