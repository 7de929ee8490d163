import { once } from 'node:events';
import { print } from 'graphql';
import pg from 'pg';
import { splitCheckout } from '../../src/features/checkout/flow.js';
import { reconcileDeps } from '../../src/entry/worker/index.js';
import { NAIVE_CHECKOUTS } from '../naive/checkout.js';
import { CheckoutDocument } from '../generated/graphql.js';
import { startServerProcess } from '../load/target.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './checkout-run.js';
import { asUser, createTenant, type TestBackend } from './harness.js';
import type { StripeStub } from './stripe-stub.js';
import { waitFor } from './wait.js';

/**
 * Where the server process dies: after transaction 1 committed and before its call reached the
 * provider (`before-call`: the stub drops the held request); while its call is in flight, the
 * charge made after the process is gone (`during-call`); or after the provider answered and before
 * transaction 2 committed (`before-record`: transaction 2 waits for a row lock the test holds).
 */
export type KillPoint = 'before-call' | 'during-call' | 'before-record';

export interface KillRunResult {
  /** The order's status and the coupon's state just after the kill, then after the reconciler's pass (or the keyed resend). */
  afterKill: string;
  afterReconcile: string;
  /** With `resend`: what the resend to a restarted server answered, and whether it named the first order. */
  resent?: { status: string; sameOrder: boolean };
  charges: number;
  violations: string[];
}

/**
 * One checkout sent to a server process of `algorithm` (test/support/checkout-server.ts) on the
 * test backend's database, the process killed with SIGKILL at `point`, then one pass of the same
 * design's reconciler on the test backend, as a surviving process would run it. Counted with SQL
 * and the stub's ledger.
 */
export async function killDuringCheckout(
  backend: TestBackend,
  stub: StripeStub,
  options: { tenantId: string; point: KillPoint; algorithm: string; resend?: boolean },
): Promise<KillRunResult> {
  const { tenantId, point } = options;
  const key: Record<string, string> = options.resend ? { 'idempotency-key': `${tenantId}-purchase` } : {};
  await createTenant(backend, tenantId, 1_000_000);
  const [coupon] = await issueCoupons(backend, tenantId, 'kill', 300, ['buyer']);
  const server = await startServerProcess(
    'test/support/checkout-server.ts',
    stubPayments(stub, { DATABASE_URL: backend.databaseUrl, RUN_WORKERS: 'false', CHECKOUT_ALGORITHM: options.algorithm }),
  );
  const locker = new pg.Client({ connectionString: backend.databaseUrl });
  try {
    const held = stub.hold();
    const send = (url: string) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...asUser(tenantId, 'buyer'), ...key },
        body: JSON.stringify({
          query: print(CheckoutDocument),
          variables: { input: { amountYen: 1_000, couponId: coupon, paymentMethod: 'pm_card_visa' } },
        }),
      });
    const sent = send(server.url).catch(() => null);
    await held.arrived;
    if (point === 'before-record') {
      const order = await waitFor(async () => (await orderOf(backend, tenantId))?.id, 'the committed order');
      await locker.connect();
      await locker.query('begin');
      await locker.query('select 1 from orders where tenant_id = $1 and id = $2 for update', [tenantId, order]);
      held.proceed();
      await waitFor(async () => {
        const waiting = await backend.sql.query(
          "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and application_name like 'mutation-backend%'",
        );
        return waiting.rowCount ? true : undefined;
      }, "the server's transaction 2 waiting for the order's row");
    }
    const exited = once(server.child, 'exit');
    server.child.kill('SIGKILL');
    await exited;
    if (point === 'before-call') held.drop();
    if (point === 'during-call') held.proceed();
    if (point === 'before-record') await locker.query('rollback');
    await sent;
    // A statement of the dead process may still run in its session until PostgreSQL notices it is gone.
    await waitFor(async () => {
      const busy = await backend.sql.query(
        "select 1 from pg_stat_activity where datname = current_database() and application_name like 'mutation-backend%' and state <> 'idle'",
      );
      return busy.rowCount ? undefined : true;
    }, "the dead process's sessions to end");
    await waitFor(() => (stub.inFlight === 0 ? true : undefined), 'the stub to finish');
    const afterKill = await stateOf(backend, tenantId);
    const resent = options.resend ? await resendToRestarted(backend, stub, options.algorithm, send, tenantId) : undefined;
    if (!options.resend) {
      await backend.sql.query("update payment_intents set next_attempt_at = now() where tenant_id = $1 and status = 'pending'", [tenantId]);
      // The reconciler of the process's algorithm, run with this backend's parts.
      const steps = NAIVE_CHECKOUTS[options.algorithm]?.(backend.services.checkout.parts) ?? splitCheckout;
      await steps.reconcile(reconcileDeps(backend.services)!);
    }
    const tables = await readCheckoutTables(backend.sql, tenantId);
    return {
      afterKill,
      afterReconcile: await stateOf(backend, tenantId),
      ...(resent ? { resent } : {}),
      charges: stub.charges.filter((charge) => charge.tenantId === tenantId).length,
      violations: checkoutViolations(tables, stub, tenantId, true),
    };
  } finally {
    await locker.end().catch(() => undefined);
    if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
  }
}

/** The same request, with the same key, to a server process started afresh: what a client does after losing its answer. */
async function resendToRestarted(
  backend: TestBackend,
  stub: StripeStub,
  algorithm: string,
  send: (url: string) => Promise<Response>,
  tenantId: string,
): Promise<{ status: string; sameOrder: boolean }> {
  const first = await orderOf(backend, tenantId);
  const restarted = await startServerProcess(
    'test/support/checkout-server.ts',
    stubPayments(stub, { DATABASE_URL: backend.databaseUrl, RUN_WORKERS: 'false', CHECKOUT_ALGORITHM: algorithm }),
  );
  try {
    const answer = (await (await send(restarted.url)).json()) as { data?: { checkout: { status: string; order: { id: string } | null } } };
    const checkout = answer.data?.checkout;
    return { status: checkout?.status ?? 'error', sameOrder: first !== undefined && checkout?.order?.id === first.id };
  } finally {
    await restarted.stop();
  }
}

async function orderOf(backend: TestBackend, tenantId: string) {
  const { rows } = await backend.sql.query<{ id: string; status: string }>('select id, status from orders where tenant_id = $1', [
    tenantId,
  ]);
  return rows[0];
}

/** "order STATUS, coupon held|redeemed|available", or "no order". */
async function stateOf(backend: TestBackend, tenantId: string): Promise<string> {
  const order = await orderOf(backend, tenantId);
  const { rows } = await backend.sql.query<{ held: boolean; redeemed: boolean }>(
    'select held_by_order_id is not null as held, redeemed_at is not null as redeemed from coupons where tenant_id = $1',
    [tenantId],
  );
  const coupon = rows[0]!.held ? 'held' : rows[0]!.redeemed ? 'redeemed' : 'available';
  return `${order ? `order ${order.status}` : 'no order'}, coupon ${coupon}`;
}
