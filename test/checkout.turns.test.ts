import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, OrdersDocument } from './generated/graphql.js';
import { stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { CANCEL_STEP, CREATE_STEP, duringHeldCall, LOOKUP_STEP, ONE_TURN, REFUND_STEP } from './support/checkout-turns.js';
import { asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, TEST_APP, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// While the payment provider answers (the payment, confirmCheckout's look-up, the cancel of a
// declined PaymentIntent, a refund), a request holds no pool connection and no admission turn:
// with one of each, another member reads and checks out meanwhile. Waiting checkouts have a bound
// of their own (PAYMENTS_MAX_WAITING), and what exceeds it is TRY_AGAIN before anything is written.
// test/checkout.naive.test.ts shows the first test fail with the charge inside transaction 1.

describe('checkout while the payment provider answers', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: stubPayments(stub, { ...ONE_TURN, PAYMENTS_MAX_WAITING: '2' }) });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it.for([
    ['create', 'the payment', CREATE_STEP, 'PAID'],
    ['lookup', "confirmCheckout's look-up", LOOKUP_STEP, 'PAID'],
    ['cancel', "a declined PaymentIntent's cancel", CANCEL_STEP, 'DECLINED'],
    ['refund', "refundOrder's refund", REFUND_STEP, 'REFUNDED'],
  ] as const)(
    'holds no connection and no turn during %s (%s): with one of each, another member reads and checks out meanwhile',
    async ([kind, , step, heldAnswer]) => {
      const result = await duringHeldCall(backend, stub, `turns-${kind}`, step);
      expect(result).toEqual({ otherRead: [], otherCheckout: 'DECLINED', inTransaction: 0, heldAnswer });
    },
  );

  it('refuses a checkout beyond PAYMENTS_MAX_WAITING with TRY_AGAIN, before anything is written', async () => {
    const tenantId = 'waiting-room';
    await createTenant(backend, tenantId, 1_000_000);
    const fetch = (request: Request) => backend.app.fetch(request);
    const send = (member: string) =>
      gql(fetch, CheckoutDocument, { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } }, asUser(tenantId, member));
    const holds = [stub.hold(), stub.hold()];
    const waiting = [send('w-1'), send('w-2')];
    await Promise.all(holds.map((hold) => hold.arrived));
    const refused = await send('w-3');
    expect(errorCodes(refused)).toEqual(['TRY_AGAIN']);
    expect(refused.body.errors![0]!.extensions).toMatchObject({ reason: 'payments busy' });
    const written = await backend.sql.query("select 1 from orders where tenant_id = $1 and member_id = 'w-3'", [tenantId]);
    expect(written.rowCount).toBe(0);
    for (const hold of holds) hold.proceed();
    expect((await Promise.all(waiting)).map((answer) => answer.body.data!.checkout.status)).toEqual(['PAID', 'PAID']);
    expect((await send('w-3')).body.data!.checkout.status).toBe('PAID');
  });
});

// Learning of a refund made elsewhere asks Stripe too: a refund event has its PaymentIntent's
// refunds listed, and the reconciler sweeps the account's. Neither holds a connection in a
// transaction while Stripe answers, and requests go on meanwhile on a pool of one.
describe('refunds learnt from Stripe while Stripe answers', () => {
  const SECRET = 'whsec_test_turns_0123456789abcdefgh';
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: stubPayments(stub, { ...ONE_TURN, STRIPE_WEBHOOK_SECRET: SECRET }) });
    stub.webhooks.sendTo(fetch, SECRET);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  /** Sessions of the app (and of its background loops) in a transaction now. */
  const inTransaction = async () =>
    (
      await backend.sql.query(
        "select 1 from pg_stat_activity where application_name like $1 and datname = current_database() and state like 'idle in transaction%'",
        [`${TEST_APP}%`],
      )
    ).rowCount;

  it.for([
    ['list-refunds', "a refund event's list of its PaymentIntent's refunds"],
    ['account-refunds', "the reconciler's sweep over the account's refunds"],
  ] as const)('holds no connection in a transaction during %s (%s)', async ([kind]) => {
    const tenantId = `turns-${kind}`;
    await createTenant(backend, tenantId, 1_000_000);
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_visa' };
    const order = (await gqlOk(fetch, CheckoutDocument, { input }, asUser(tenantId, 'first'))).checkout.order!;
    await stub.webhooks.settled();
    // Every event is held, and only the refund's charge.refunded delivered (in list-refunds): no
    // other delivery writes while the sessions are counted.
    stub.webhooks.mode = 'held';
    const held = stub.hold(kind);
    const intentId = stub.intentOf(order.id)!.id;
    stub.refundInDashboard(intentId, 400);
    if (kind === 'account-refunds') await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    const learnt =
      kind === 'account-refunds'
        ? backend.services.checkout.reconcile(reconcileDeps(backend.services)!)
        : stub.webhooks.deliver({ lose: (event) => event.intentId !== intentId || event.type !== 'charge.refunded' });
    await held.arrived;
    const read = await gql(fetch, OrdersDocument, {}, asUser(tenantId, 'second'));
    const other = await gql(fetch, CheckoutDocument, { input }, asUser(tenantId, 'second'));
    const sessions = await inTransaction();
    held.proceed();
    await learnt;
    stub.webhooks.mode = 'immediate';
    expect({ read: errorCodes(read), other: other.body.data?.checkout.status, sessions }).toEqual({ read: [], other: 'PAID', sessions: 0 });
    const { rows } = await backend.sql.query('select refunded_yen from orders where id = $1', [order.id]);
    expect(rows[0].refunded_yen).toBe(400);
  });
});
