import { once } from 'node:events';
import { print, type DocumentNode } from 'graphql';
import pg from 'pg';
import { startServerProcess, type ServerProcess } from '../load/target.js';
import { stubPayments } from './checkout-run.js';
import type { TestBackend } from './harness.js';
import type { CallKind, StripeStub } from './stripe-stub.js';
import { waitFor } from './wait.js';

/**
 * A server process (test/support/checkout-server.ts, the split design) on the test backend's
 * database, killed with SIGKILL after Stripe answered one of its calls and before the answer is
 * recorded: the call is held at the stub, the test locks the order's row, lets the call go on, and
 * kills the process once its transaction waits for that row. Then a server process started afresh
 * (or the reconciler) finishes the step. Slow: each case starts server processes.
 */

/** The server process's environment: the stub, the test backend's database, and what the case adds. */
const serverEnv = (backend: TestBackend, stub: StripeStub, extra: Record<string, string> = {}) =>
  stubPayments(stub, { DATABASE_URL: backend.databaseUrl, RUN_WORKERS: 'false', ...extra });

export const startCheckoutServer = (backend: TestBackend, stub: StripeStub, extra: Record<string, string> = {}) =>
  startServerProcess('test/support/checkout-server.ts', serverEnv(backend, stub, extra));

/** A GraphQL request to a server process, with the caller's headers (a key among them); its JSON answer, or null when the process died. */
export async function postGraphQL(
  server: ServerProcess,
  document: DocumentNode,
  variables: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<{ data?: Record<string, unknown>; errors?: unknown[] } | null> {
  try {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query: print(document), variables }),
    });
    return (await response.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  } catch {
    return null;
  }
}

/** Stripe's webhook deliveries sent to a server process's POST /webhooks/stripe. */
export const webhookTarget = (server: ServerProcess) => async (request: Request) =>
  fetch(new URL('/webhooks/stripe', server.url), { method: 'POST', headers: request.headers, body: await request.text() });

/** Sessions of server processes (not the test's own) in the test backend's database. */
const serverSessions = async (backend: TestBackend, where: string) =>
  (
    await backend.sql.query(
      `select 1 from pg_stat_activity where datname = current_database() and application_name like 'mutation-backend%' and ${where}`,
    )
  ).rowCount ?? 0;

export interface KillBeforeRecord {
  /** The call of the step whose answer is lost with the process. */
  kind: CallKind;
  /** The order whose row the step's recording transaction locks. */
  tenantId: string;
  orderId: string;
  /** Starts the step (a request to the process, or nothing: its reconciler makes the call); resolves once it is over, or the process gone. */
  start(): Promise<unknown>;
}

/** Runs `step` in `server` up to the moment after Stripe answered, and kills the process there with SIGKILL. */
export async function killBeforeRecord(backend: TestBackend, stub: StripeStub, server: ServerProcess, step: KillBeforeRecord) {
  const locker = new pg.Client({ connectionString: backend.databaseUrl });
  await locker.connect();
  try {
    const held = stub.hold(step.kind);
    const sent = step.start().catch(() => null);
    await held.arrived;
    await locker.query('begin');
    await locker.query('select 1 from orders where tenant_id = $1 and id = $2 for update', [step.tenantId, step.orderId]);
    held.proceed();
    await waitFor(
      async () => ((await serverSessions(backend, "wait_event_type = 'Lock'")) > 0 ? true : undefined),
      'the recording waiting',
    );
    await waitFor(() => (stub.inFlight === 0 ? true : undefined), 'the stub to answer');
    const exited = once(server.child, 'exit');
    server.child.kill('SIGKILL');
    await exited;
    await locker.query('rollback');
    await sent;
    // A statement of the dead process may still run in its session until PostgreSQL notices it is gone.
    await waitFor(
      async () => ((await serverSessions(backend, "state <> 'idle'")) > 0 ? undefined : true),
      "the dead process's sessions to end",
    );
  } finally {
    await locker.end().catch(() => undefined);
    if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
  }
}

/** Runs `work` against a server process started afresh, then stops it. */
export async function withRestarted<T>(
  backend: TestBackend,
  stub: StripeStub,
  extra: Record<string, string>,
  work: (server: ServerProcess) => Promise<T>,
): Promise<T> {
  const server = await startCheckoutServer(backend, stub, extra);
  try {
    return await work(server);
  } finally {
    await server.stop();
  }
}
