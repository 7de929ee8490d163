import { OrdersDocument, CheckoutDocument } from '../generated/graphql.js';
import { asUser, createTenant, errorCodes, gql, TEST_APP, type TestBackend } from './harness.js';
import type { StripeStub } from './stripe-stub.js';

/** One connection and one turn: a checkout that kept either while the provider answers would stop everyone else. */
export const ONE_TURN = { DB_POOL_MAX: '1', MAX_IN_FLIGHT: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '1000' };

export interface HeldCallResult {
  /** What another member's read and checkout got while the first checkout's call was held at the provider. */
  otherRead: unknown[];
  otherCheckout: string;
  /** Sessions of the app's pool in a transaction meanwhile. */
  inTransaction: number;
  /** The held checkout's answer once the provider answered. */
  heldAnswer: string;
}

/**
 * A checkout whose call the stub holds; meanwhile another member of the tenant reads its orders and
 * checks out (declined, so it does not wait on a hold), and the pool's sessions are counted.
 */
export async function duringHeldCall(backend: TestBackend, stub: StripeStub, tenantId: string): Promise<HeldCallResult> {
  await createTenant(backend, tenantId, 1_000_000);
  const fetch = (request: Request) => backend.app.fetch(request);
  const held = stub.hold();
  const first = gql(fetch, CheckoutDocument, { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } }, asUser(tenantId, 'first'));
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
  async function finish() {
    held.proceed();
    const answer = await first;
    return answer.body.data?.checkout.status ?? String(errorCodes(answer)[0]);
  }
}
