import { ConfirmCheckoutDocument, OrdersDocument, CheckoutDocument, RefundOrderDocument } from '../generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, errorCodes, gql, gqlOk, TEST_APP, type TestBackend } from './harness.js';
import type { CallKind, StripeStub } from './stripe-stub.js';

/** One connection and one turn: a checkout that kept either while the provider answers would stop everyone else. */
export const ONE_TURN = { DB_POOL_MAX: '1', MAX_IN_FLIGHT: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '1000' };

export interface HeldCallResult {
  /** What another member's read and checkout got while the first request's call was held at the provider. */
  otherRead: unknown[];
  otherCheckout: string;
  /** Sessions of the app's pool in a transaction meanwhile. */
  inTransaction: number;
  /** The held request's answer once the provider answered. */
  heldAnswer: string;
}

type Fetch = (request: Request) => Promise<Response>;

/** A request whose call to Stripe the test holds: the kind of call, what comes before it, and the request (answering its status). */
export interface HeldStep {
  kind: CallKind;
  send(fetch: Fetch, stub: StripeStub, tenantId: string): Promise<() => Promise<string>>;
}

const statusOf = (response: { body: { data?: unknown; errors?: unknown } }, read: (data: never) => string) =>
  response.body.data ? read(response.body.data as never) : String(errorCodes(response as never)[0]);

/** checkout's create: the payment itself. */
export const CREATE_STEP: HeldStep = {
  kind: 'create',
  send: async (fetch, _stub, tenantId) => {
    const sent = gql(fetch, CheckoutDocument, { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } }, asUser(tenantId, 'first'));
    return async () => statusOf(await sent, (data: { checkout: { status: string } }) => data.checkout.status);
  },
};

/** confirmCheckout's look-up, after the browser finished 3-D Secure. */
export const LOOKUP_STEP: HeldStep = {
  kind: 'lookup',
  send: async (fetch, stub, tenantId) => {
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_threeDSecure2Required' };
    const order = (await gqlOk(fetch, CheckoutDocument, { input }, asUser(tenantId, 'first'))).checkout.order!;
    stub.authenticate(stub.intentOf(order.id)!.id, 'succeed');
    const sent = gql(fetch, ConfirmCheckoutDocument, { input: { orderId: order.id } }, asUser(tenantId, 'first'));
    return async () => statusOf(await sent, (data: { confirmCheckout: { status: string } }) => data.confirmCheckout.status);
  },
};

/** The cancel of a declined PaymentIntent, before its order is canceled. */
export const CANCEL_STEP: HeldStep = {
  kind: 'cancel',
  send: async (fetch, _stub, tenantId) => {
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_chargeDeclined' };
    const sent = gql(fetch, CheckoutDocument, { input }, asUser(tenantId, 'first'));
    return async () => statusOf(await sent, (data: { checkout: { status: string } }) => data.checkout.status);
  },
};

/** refundOrder's refund, of a paid order. */
export const REFUND_STEP: HeldStep = {
  kind: 'refund',
  send: async (fetch, _stub, tenantId) => {
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_visa' };
    const order = (await gqlOk(fetch, CheckoutDocument, { input }, asUser(tenantId, 'first'))).checkout.order!;
    const sent = gql(fetch, RefundOrderDocument, { input: { orderId: order.id } }, asTenantAdmin(tenantId));
    return async () => statusOf(await sent, (data: { refundOrder: { order: { status: string } } }) => data.refundOrder.order.status);
  },
};

/**
 * A request whose call the stub holds; meanwhile another member of the tenant reads its orders and
 * checks out (declined, so it does not wait on a hold), and the pool's sessions are counted.
 */
export async function duringHeldCall(
  backend: TestBackend,
  stub: StripeStub,
  tenantId: string,
  step = CREATE_STEP,
): Promise<HeldCallResult> {
  await createTenant(backend, tenantId, 1_000_000);
  const fetch = (request: Request) => backend.app.fetch(request);
  const held = stub.hold(step.kind);
  const answer = await step.send(fetch, stub, tenantId);
  await held.arrived;
  try {
    const read = await gql(fetch, OrdersDocument, {}, asUser(tenantId, 'second'));
    const other = await gql(
      fetch,
      CheckoutDocument,
      { input: { amountYen: 500, paymentMethod: 'pm_card_chargeDeclined' } },
      asUser(tenantId, 'second'),
    );
    const sessions = await backend.sql.query(
      "select 1 from pg_stat_activity where application_name = $1 and datname = current_database() and state like 'idle in transaction%'",
      [TEST_APP],
    );
    return {
      otherRead: errorCodes(read),
      otherCheckout: other.body.data?.checkout.status ?? String(errorCodes(other)[0]),
      inTransaction: sessions.rowCount ?? 0,
      heldAnswer: await finish(),
    };
  } catch (error) {
    await finish();
    throw error;
  }
  function finish() {
    held.proceed();
    return answer();
  }
}
