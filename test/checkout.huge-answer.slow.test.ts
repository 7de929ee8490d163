import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckoutDocument } from './generated/graphql.js';
import { startServerProcess, type ServerProcess } from './load/target.js';
import { TEST_STRIPE_KEY } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, type TestBackend } from './support/harness.js';
import { honestIntent, startHostileProvider, type HostileProvider } from './support/hostile-provider.js';
import { waitFor } from './support/wait.js';

// A provider that answers 600 MB: the `stripe` package's own client appends an answer to one
// string with no limit, which ended the process (RangeError: Invalid string length) and again after
// every restart, when the reconciler asked again. A server process (test/support/checkout-server.ts)
// meets it here, so that what it does to a process is seen from outside.

const TENANT = 'huge-answer';
const HUGE_BYTES = 600 * 2 ** 20;

async function residentBytes(server: ServerProcess): Promise<number> {
  const text = await (await fetch(server.metricsUrl)).text();
  return Number(/^process_resident_memory_bytes\{[^}]*\} (\d+)/m.exec(text)![1]);
}

describe('checkout when the provider answers 600 MB', () => {
  let hostile: HostileProvider;
  let backend: TestBackend;
  const servers: ServerProcess[] = [];
  const start = async (env: Record<string, string>) => {
    const server = await startServerProcess('test/support/checkout-server.ts', {
      DATABASE_URL: backend.databaseUrl,
      STRIPE_SECRET_KEY: TEST_STRIPE_KEY,
      STRIPE_API_URL: hostile.url,
      PAYMENTS_TIMEOUT_MS: '2000',
      ...env,
    });
    servers.push(server);
    return server;
  };
  const checkout = async (server: ServerProcess, member: string) => {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...asUser(TENANT, member) },
      body: JSON.stringify({ query: print(CheckoutDocument), variables: { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } } }),
    });
    return ((await response.json()) as { data: { checkout: { status: string; order: { id: string } } } }).data.checkout;
  };

  beforeAll(async () => {
    hostile = await startHostileProvider();
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    for (const server of servers) if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
    await backend.close();
    await hostile.close();
  });

  it('reads a megabyte of it and no more: the process lives on, the payment is set aside, and a restarted reconciler does not ask again', async ({
    annotate,
  }) => {
    const first = await start({ RUN_WORKERS: 'false' });
    // A payment whose call times out: the reconciler of the restarted server settles it, which shows its pass ran.
    hostile.answer = () => ({ kind: 'trickle', everyMs: 1_000 });
    const control = await checkout(first, 'control');
    hostile.answer = (request) => ({ kind: 'huge', body: honestIntent(request), bytes: HUGE_BYTES });
    const before = await residentBytes(first);
    const huge = await checkout(first, 'huge');
    const grownBytes = (await residentBytes(first)) - before;
    expect([control.status, huge.status]).toEqual(['PENDING', 'PENDING']);
    expect((await fetch(first.url.replace('/graphql', '/health'))).status).toBe(200);
    expect(first.child.exitCode).toBeNull();
    await annotate(
      `600 MB answer: the provider wrote ${hostile.bytesSent} bytes before the server closed; resident memory grew ${grownBytes} bytes`,
    );
    expect(hostile.bytesSent).toBeLessThan(16 * 2 ** 20);
    const { rows } = await backend.sql.query('select set_aside_at is not null as set_aside from payment_intents where order_id = $1', [
      huge.order.id,
    ]);
    expect(rows[0].set_aside).toBe(true);
    await first.stop();

    const askedAboutHuge = () => hostile.requests.filter((request) => request.fields['metadata[order_id]'] === huge.order.id).length;
    const asked = askedAboutHuge();
    hostile.answer = (request) =>
      request.fields['metadata[order_id]'] === control.order.id
        ? { kind: 'json', body: honestIntent(request) }
        : { kind: 'huge', body: honestIntent(request), bytes: HUGE_BYTES };
    await backend.sql.query("update payment_intents set next_attempt_at = now() where status = 'pending'");
    const restarted = await start({ RUN_WORKERS: 'true', PAYMENTS_RECONCILE_INTERVAL_MS: '100' });
    await waitFor(async () => {
      const paid = await backend.sql.query("select 1 from orders where id = $1 and status = 'PAID'", [control.order.id]);
      return paid.rowCount ? true : undefined;
    }, "the restarted server's reconciler to settle the control payment");
    expect(askedAboutHuge()).toBe(asked);
    expect((await fetch(restarted.url.replace('/graphql', '/health'))).status).toBe(200);
    expect(restarted.child.exitCode).toBeNull();
  });
});
