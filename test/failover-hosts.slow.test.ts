import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { createLogger } from '../src/core/logger.js';
import { mutate } from '../src/client/mutate.js';
import { CreateTenantDocument } from './generated/graphql.js';
import { asOperator, createTestBackend, errorCodes, gql, type TestBackend } from './support/harness.js';
import { startHoldingProxy, type HoldingProxy } from './support/holding-proxy.js';
import { migrateDatabaseAt } from './support/tool-database.js';

/**
 * A multi-host DATABASE_URL with target_session_attrs=read-write, against two PostgreSQL servers
 * of this file's own: one that accepts writes and one that does not (default_transaction_read_only,
 * which a session sees exactly as it sees a hot standby: transaction_read_only is on and a write
 * fails with 25006). Then the two swap, as a failover does, while the server keeps its pool.
 * The real failover, with Patroni and replication, is test/patroni.failover.slow.test.ts.
 *
 * A second server process of the same code (`racing`) reaches the second host through a proxy
 * that can hold the answer to a new connection's target_session_attrs check: a switchover's race,
 * made to last (see the last two tests).
 */
const PASSWORD = 'failover-test-password';
/** The racing server's connections, told apart from the other server's. */
const RACING_APP = 'test-app-racing';
const DATABASE = 'app';

interface Server {
  postgres: EmbeddedPostgres;
  admin: pg.Pool;
}

async function startServer(root: string, name: string): Promise<Server> {
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(root, name),
    port: 0,
    log: createLogger('silent'),
    ephemeral: true,
  });
  const setup = new pg.Client({ connectionString: postgres.connectionString('postgres') });
  await setup.connect();
  try {
    // One password for both, as the servers of one HA cluster share their users.
    await setup.query(`alter user postgres password '${PASSWORD}'`);
    await setup.query(`create database ${DATABASE}`);
  } finally {
    await setup.end();
  }
  await migrateDatabaseAt(url(postgres.port));
  // With the new password: a pool's idle connection closes after 10 s, and one it opens again must log in.
  const admin = new pg.Pool({ connectionString: url(postgres.port, 'postgres'), max: 1 });
  admin.on('error', () => {});
  return { postgres, admin };
}

const url = (port: number, database = DATABASE) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`;

/** Writes on or off for every session of the server, the ones open now included (they read the setting at their next transaction). */
async function acceptWrites(server: Server, writes: boolean) {
  await server.admin.query(
    writes ? 'alter system reset default_transaction_read_only' : 'alter system set default_transaction_read_only = on',
  );
  await server.admin.query('select pg_reload_conf()');
  // pg_reload_conf() only signals the postmaster; the switch is done once the postmaster has read
  // the file (a new session, forked from it, sees the setting), which it does before it signals
  // the sessions already open, and those apply it before their next command.
  const expected = writes ? 'off' : 'on';
  for (;;) {
    const client = new pg.Client({ connectionString: url(server.postgres.port) });
    await client.connect();
    try {
      const { rows } = await client.query<{ default_transaction_read_only: string }>('show default_transaction_read_only');
      if (rows[0]!.default_transaction_read_only === expected) return;
    } finally {
      await client.end();
    }
    await sleep(20);
  }
}

async function tenantsOn(server: Server, prefix: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url(server.postgres.port) });
  await client.connect();
  try {
    return (await client.query<{ id: string }>('select id from tenants where id like $1 order by id', [`${prefix}%`])).rows.map(
      (r) => r.id,
    );
  } finally {
    await client.end();
  }
}

describe('a multi-host DATABASE_URL with target_session_attrs=read-write', () => {
  let root: string;
  let first: Server;
  let second: Server;
  let backend: TestBackend;
  let proxy: HoldingProxy;
  let racing: TestBackend;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-hosts-'));
    await chmod(root, 0o755);
    [first, second] = await Promise.all([startServer(root, 'first'), startServer(root, 'second')]);
    backend = await createTestBackend({
      databaseUrl: `postgres://postgres:${PASSWORD}@127.0.0.1:${first.postgres.port},127.0.0.1:${second.postgres.port}/${DATABASE}?target_session_attrs=read-write`,
      env: { DB_POOL_MAX: '4' },
    });
    proxy = await startHoldingProxy(second.postgres.port);
    racing = await createTestBackend({
      databaseUrl: `postgres://postgres:${PASSWORD}@127.0.0.1:${first.postgres.port},127.0.0.1:${proxy.port}/${DATABASE}?target_session_attrs=read-write&application_name=${RACING_APP}`,
      // The held connection must outlive the whole trial: only its late answer is under test.
      env: { DB_POOL_MAX: '2', DB_POOL_CONNECT_TIMEOUT_MS: '60000', REQUEST_DEADLINE_MS: '3000' },
    });
  });

  afterAll(async () => {
    await racing?.close();
    await proxy?.close();
    await backend?.close();
    for (const server of [first, second]) {
      await server?.admin.end();
      await server?.postgres.stop();
    }
    await rm(root, { recursive: true, force: true });
  });

  const createTenant = (id: string) =>
    gql(backend.app.fetch, CreateTenantDocument, { input: { id, name: id } }, { ...asOperator(), 'idempotency-key': `key-${id}` });

  /** As a client does with TRY_AGAIN (the typed client): resent with its key until answered. */
  const createTenantResending = (id: string) =>
    mutate(
      CreateTenantDocument,
      { input: { id, name: id } },
      {
        url: 'http://test.local/graphql',
        headers: asOperator(),
        idempotencyKey: `key-${id}`,
        transport: async (url, init) => {
          const response = await backend.app.fetch(new Request(url, { method: 'POST', headers: init.headers, body: init.body }));
          return { status: response.status, headers: response.headers, body: await response.json() };
        },
      },
    );

  /** Which of the two accepts writes; each test sets what it starts from (tests run in any order). */
  async function primaryIs(server: 'first' | 'second' | 'neither') {
    await acceptWrites(first, server === 'first');
    await acceptWrites(second, server === 'second');
  }

  it('connects to the host that accepts writes, skipping the one listed first', async () => {
    await primaryIs('second');
    // A test before this one may have left both hosts failing: the first requests may hear TRY_AGAIN until a connection succeeds.
    await Promise.all(Array.from({ length: 8 }, (_, i) => createTenantResending(`before-${i}`)));
    expect(await tenantsOn(second, 'before-')).toHaveLength(8);
    expect(await tenantsOn(first, 'before-')).toEqual([]);
  });

  it('follows a switchover: a write refused on a connection to the demoted host (25006) is retried on the new primary, never answered TRY_AGAIN', async () => {
    // Every pool connection open on the second host, then the two swap.
    await primaryIs('second');
    await Promise.all(Array.from({ length: 8 }, (_, i) => createTenantResending(`warm-${i}`)));
    await primaryIs('first');
    const answers = [];
    for (let i = 0; i < 12; i++) answers.push(await createTenant(`after-${i}`));
    expect(answers.map(errorCodes).flat()).toEqual([]);
    expect(await tenantsOn(first, 'after-')).toHaveLength(12);
    expect(await tenantsOn(second, 'after-')).toEqual([]);
    // No connection of the pool stays on the host that no longer takes writes.
    const { rows } = await second.admin.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name = 'test-app' and datname = $1",
      [DATABASE],
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('when no host accepts writes, requests answer TRY_AGAIN at once, saying so without naming the machines', async ({ annotate }) => {
    await primaryIs('neither');
    try {
      const started = performance.now();
      const answer = await createTenant('nowhere');
      const tookMs = performance.now() - started;
      expect(errorCodes(answer)).toEqual(['TRY_AGAIN']);
      const error = answer.body.errors![0]!;
      expect(error.message).toMatch(/is a standby \(accepts no writes\)/);
      expect(error.message).not.toMatch(/127\.0\.0\.1|\d{4,5}/);
      expect(['connect', 'unavailable', '25006']).toContain(error.extensions?.['reason']);
      await annotate(`no writable host: TRY_AGAIN after ${tookMs.toFixed(0)} ms: ${error.message}`);
    } finally {
      await primaryIs('first');
    }
  });

  const createTenantRacing = (id: string) =>
    gql(racing.app.fetch, CreateTenantDocument, { input: { id, name: id } }, { ...asOperator(), 'idempotency-key': `key-${id}` });

  /** Sent until it is served: the test before may have left every host failing for a moment. */
  async function servedRacing(id: string) {
    for (let i = 0; ; i++) {
      if (errorCodes(await createTenantRacing(`${id}-${i}`)).length === 0) return;
      await sleep(100);
    }
  }

  /** The racing server's request connections closed from the server side (not its health check's, last seen running its select 1). */
  async function closePoolConnections() {
    for (const server of [first, second])
      await server.admin.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and query not like 'select 1%'",
        [RACING_APP],
      );
  }

  it('does not mark the promoted host failing: once a connection found it writable, every request is served', async () => {
    await acceptWrites(first, true);
    await acceptWrites(second, false);
    // A connection to the second host left in the pool by the test before would serve the writes
    // below without a new connection, so without the target check this test holds.
    await closePoolConnections();
    await servedRacing('race-before');

    // The switchover begins: the primary stops taking writes, and the next connection to the
    // standby asks whether it does; its answer ("on") is held.
    proxy.holdNextTargetCheck();
    await acceptWrites(first, false);
    const held = proxy.holding();
    let caught = createTenantRacing('race-caught-0');
    for (let i = 1; !(await Promise.race([held.then(() => true), caught.then(() => false)])); i++) {
      // Answered without a new connection to the second host (a test before left it judged failing
      // for a moment): the next request asks again.
      await sleep(100);
      caught = createTenantRacing(`race-caught-${i}`);
    }

    // The standby is promoted, and a connection finds it writable (the health check's or a request's).
    await acceptWrites(second, true);
    await servedRacing('race-promoted');
    await caught;

    // Only now does the held answer arrive: "a standby", about a moment long gone.
    await proxy.release();

    // The connections the pool holds go away (as at any restart), so the next requests need new ones.
    await closePoolConnections();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await createTenantRacing(`race-after-${i}`));
    const reasons = answers
      .flatMap((answer) => answer.body.errors ?? [])
      .map((error) => `${error.extensions?.['reason']}: ${error.message}`);
    expect(reasons).toEqual([]);
  });

  it('a new connection closed by the server during its target check fails that attempt, and the process goes on serving', async () => {
    await acceptWrites(first, false);
    await acceptWrites(second, true);
    await servedRacing('race-ready');
    proxy.holdNextTargetCheck();
    await closePoolConnections();
    const request = createTenantRacing('race-dropped');
    await proxy.holding();
    // As a node that shuts down between the handshake and the first query closes a connection.
    proxy.drop();
    const answer = await request;
    expect(answer.status).toBe(200);
    await servedRacing('race-after-drop');
  });
});
