import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateTenantDocument } from './generated/graphql.js';
import { asOperator, createTestBackend, errorCodes, gql, TEST_APP, type TestBackend } from './support/harness.js';
import { acceptWrites, DATABASE, PASSWORD, startServer, type Server } from './support/two-servers.js';

/**
 * A switchover's race, without Patroni: a new connection to the standby asks whether it takes
 * writes, the standby is promoted, another connection finds it writable, and only then does the
 * first one's answer ("a standby", true when it was given) arrive. Before the fix that late answer
 * marked the one host that works as failing; with the old primary failing too, requests that
 * needed a new connection were told "No database host is usable right now" while the health
 * check, on the connection it keeps, said the database was back.
 *
 * The standby is reached through a proxy of this file's own that can hold the answer to the next
 * target_session_attrs check for as long as the test needs.
 */

interface HoldingProxy {
  port: number;
  /** The next connection that asks `show transaction_read_only` gets its answer only at release(). */
  holdNextTargetCheck(): void;
  /** Resolves once a connection's answer is held. */
  holding(): Promise<void>;
  /** Delivers the held answer; resolves once that connection is closed (its client gave up on it). */
  release(): Promise<void>;
  /** Closes the connection whose answer is held instead, as a node that shuts down closes it. */
  drop(): void;
  close(): Promise<void>;
}

async function startHoldingProxy(port: number): Promise<HoldingProxy> {
  let armed = false;
  let held: { client: net.Socket; release: () => void } | null = null;
  let onHolding: (() => void) | null = null;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    sockets.add(client).add(upstream);
    const withheld: Buffer[] = [];
    let holding = false;
    client.on('data', (chunk: Buffer) => {
      if (armed && chunk.includes('show transaction_read_only')) {
        armed = false;
        holding = true;
        held = {
          client,
          release: () => {
            holding = false;
            for (const answer of withheld.splice(0)) client.write(answer);
          },
        };
        onHolding?.();
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => (holding ? withheld.push(chunk) : client.write(chunk)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    holdNextTargetCheck: () => (armed = true),
    holding: () => (held ? Promise.resolve() : new Promise<void>((resolve) => (onHolding = resolve))),
    async release() {
      const { client, release } = held!;
      held = null;
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      release();
      await closed;
    },
    drop() {
      held!.client.destroy();
      held = null;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a late "standby" answer during a switchover', () => {
  let root: string;
  let first: Server;
  let second: Server;
  let proxy: HoldingProxy;
  let backend: TestBackend;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-late-answer-'));
    await chmod(root, 0o755);
    [first, second] = await Promise.all([startServer(root, 'first'), startServer(root, 'second')]);
    proxy = await startHoldingProxy(second.postgres.port);
    backend = await createTestBackend({
      databaseUrl: `postgres://postgres:${PASSWORD}@127.0.0.1:${first.postgres.port},127.0.0.1:${proxy.port}/${DATABASE}?target_session_attrs=read-write`,
      // The held connection must outlive the whole trial: only its late answer is under test.
      env: { DB_POOL_MAX: '2', DB_POOL_CONNECT_TIMEOUT_MS: '60000', REQUEST_DEADLINE_MS: '3000' },
    });
  });

  afterAll(async () => {
    await backend?.close();
    await proxy?.close();
    for (const server of [first, second]) {
      await server?.admin.end();
      await server?.postgres.stop();
    }
    await rm(root, { recursive: true, force: true });
  });

  const createTenant = (id: string) =>
    gql(backend.app.fetch, CreateTenantDocument, { input: { id, name: id } }, { ...asOperator(), 'idempotency-key': `key-${id}` });

  /** Sent until it is served: the test before may have left every host failing for a moment. */
  async function served(id: string) {
    for (let i = 0; ; i++) {
      if (errorCodes(await createTenant(`${id}-${i}`)).length === 0) return;
      await sleep(100);
    }
  }

  /** The pool's connections closed from the server side: the next requests need new ones. */
  async function closePoolConnections() {
    for (const server of [first, second])
      await server.admin.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1', [TEST_APP]);
  }

  it('does not mark the promoted host failing: once a connection found it writable, every request is served', async () => {
    await acceptWrites(first, true);
    await acceptWrites(second, false);
    await served('before');

    // The switchover begins: the primary stops taking writes, and the next connection to the
    // standby asks whether it does; its answer ("on") is held.
    proxy.holdNextTargetCheck();
    await acceptWrites(first, false);
    const caught = createTenant('caught');
    await proxy.holding();

    // The standby is promoted, and a connection finds it writable (the health check's or a request's).
    await acceptWrites(second, true);
    await served('promoted');
    await caught;

    // Only now does the held answer arrive: "a standby", about a moment long gone.
    await proxy.release();

    // The connections the pool holds go away (as at any restart), so the next requests need new ones.
    await closePoolConnections();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await createTenant(`after-${i}`));
    const reasons = answers
      .flatMap((answer) => answer.body.errors ?? [])
      .map((error) => `${error.extensions?.['reason']}: ${error.message}`);
    expect(reasons).toEqual([]);
  });

  it('a new connection closed by the server during its target check fails that attempt, and the process goes on serving', async () => {
    await acceptWrites(first, false);
    await acceptWrites(second, true);
    await served('ready');
    proxy.holdNextTargetCheck();
    await closePoolConnections();
    const request = createTenant('dropped');
    await proxy.holding();
    // As a node that shuts down between the handshake and the first query closes a connection.
    proxy.drop();
    const answer = await request;
    expect(answer.status).toBe(200);
    await served('after-drop');
  });
});
