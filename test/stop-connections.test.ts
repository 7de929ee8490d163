import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startBackend } from '../src/entry/backend.js';
import { loadConfig } from '../src/core/config.js';
import { createDatabase } from '../src/db/database.js';
import { createLogger } from '../src/core/logger.js';
import { runInRequestScope } from '../src/core/request-scope.js';
import { databaseOptions } from '../src/process/open-database.js';
import { startDelayProxy, throughProxy } from './load/delay-proxy.js';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy.js';
import { createTestDatabaseUrl } from './support/harness.js';
import { captureLog } from './support/log-capture.js';
import { waitFor } from './support/wait.js';

/**
 * Once the pools have closed, nothing of the process (the health watcher, the background loops,
 * the lease expiry, a request that outlived the drain) may open a database connection again: on
 * a dead path one would hold the process up for its connect timeout. The connections are counted
 * where they arrive, at a proxy of the test's own.
 */

let proxy: FaultProxy | null = null;
afterEach(async () => {
  await proxy?.close();
  proxy = null;
});

async function proxiedDatabaseUrl() {
  const databaseUrl = await createTestDatabaseUrl();
  const target = new URL(databaseUrl);
  proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
  return proxy.url(databaseUrl);
}

const log = createLogger(process.env['TEST_LOG_LEVEL'] ?? 'silent');

describe('after the pools close', () => {
  it('a health check asked for and a statement sent open no connection, and answer at once', async () => {
    const url = await proxiedDatabaseUrl();
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: url });
    // An HTTP process of the cluster checks its database only once /ready is asked: here it never was.
    const database = createDatabase(databaseOptions(config, url, 'stop-test'), log);
    await sql`select 1`.execute(database.db);
    await database.close();
    const atClose = proxy!.acceptedConnections();

    expect(await database.health.current()).toMatchObject({ available: false });
    await expect(sql`select 1`.execute(database.db)).rejects.toThrow();
    // Below Kysely (which refuses once destroyed): the pool itself.
    await expect(database.pool.kyselyPool.connect()).rejects.toThrow(/closed: the process is stopping/);
    await sleep(500);
    expect(proxy!.acceptedConnections() - atClose).toBe(0);
  });

  it('a stop with a blackholed path, its loops and health checks running: no connection once the pools have closed', async () => {
    const url = await proxiedDatabaseUrl();
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: url,
      PORT: '0',
      RUN_WORKERS: 'true',
      OUTBOX_POLL_INTERVAL_MS: '20',
      HUDDLE_CLEANUP_INTERVAL_MS: '50',
      DB_HEALTH_CHECK_INTERVAL_MS: '100',
      DB_POOL_CONNECT_TIMEOUT_MS: '500',
      STATEMENT_TIMEOUT_MS: '1000',
      HTTP_DRAIN_TIMEOUT_MS: '1000',
    });
    const backend = await startBackend({ config, log, seed: false, watchDatabase: true });
    // The loops and the health checks run, then the path dies under them.
    await sleep(500);
    proxy!.blackhole();
    await sleep(300);
    await backend.stop({ graceMs: 0 });
    const atClose = proxy!.acceptedConnections();
    // Several health-check intervals, connect timeouts and loop ticks.
    await sleep(3_000);
    expect(proxy!.acceptedConnections() - atClose).toBe(0);
  });
});

/** Backends of PostgreSQL whose application_name starts with `name`, counted on a connection of the test's own. */
async function backendsOf(databaseUrl: string, name: string): Promise<number> {
  const observer = new pg.Client({ connectionString: databaseUrl });
  await observer.connect();
  try {
    const { rows } = await observer.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name like $1 || '%' and datname = current_database()",
      [name],
    );
    return rows[0]!.n;
  } finally {
    await observer.end();
  }
}

describe('an orderly stop leaves PostgreSQL nothing to terminate', () => {
  it('close() ends once every connection is closed, not once each was asked to close: the database stopped next finds none', async () => {
    const direct = await createTestDatabaseUrl();
    const target = new URL(direct);
    // 100 ms each way: a connection asked to close is still open at PostgreSQL for that long.
    const delay = await startDelayProxy({ target: { host: target.hostname, port: Number(target.port) }, delayMs: 100 });
    try {
      const url = throughProxy(direct, delay.port);
      const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: url });
      const database = createDatabase(databaseOptions(config, url, 'closing-test'), log);
      // Three connections of the request pool, idle by the time it closes, and the health check's.
      await Promise.all([1, 2, 3].map(() => sql`select pg_sleep(0.05)`.execute(database.db)));
      await database.health.current();
      // Counted on a direct connection opened before the close, so it answers within the 100 ms.
      const observer = new pg.Client({ connectionString: direct });
      await observer.connect();
      try {
        const count = async () =>
          (
            await observer.query<{ n: number }>(
              "select count(*)::int as n from pg_stat_activity where application_name like 'closing-test%' and datname = current_database()",
            )
          ).rows[0]!.n;
        expect(await count()).toBeGreaterThanOrEqual(3);
        await database.close();
        // An embedded PostgreSQL is stopped right here at shutdown: a backend still open would be
        // terminated (57P01) and its connection would log a failure.
        expect(await count()).toBe(0);
      } finally {
        await observer.end();
      }
    } finally {
      await delay.close();
    }
  });

  it('a connection that fails long after the request that opened it logs no request id: the request scope stays with the request', async () => {
    const url = await createTestDatabaseUrl();
    const { lines, logger } = captureLog('warn');
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: url });
    const database = createDatabase(databaseOptions(config, url, 'scope-test'), logger);
    try {
      // The pool's first connection is opened for this request, then kept idle in the pool.
      await runInRequestScope({ requestId: 'long-finished-request' }, () => sql`select 1`.execute(database.db));
      expect(await backendsOf(url, 'scope-test')).toBe(1);
      // PostgreSQL ends it, as it does at a stop or a restart.
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'scope-test'");
      await admin.end();
      const failure = await waitFor(
        () => lines.find((line) => String(line['msg']).startsWith('idle database connection failed')),
        'the log line of the failed connection',
      );
      expect(failure).toMatchObject({ err: { code: '57P01' } });
      for (const line of lines) expect(line).not.toHaveProperty('requestId');
    } finally {
      await database.close();
    }
  });
});
