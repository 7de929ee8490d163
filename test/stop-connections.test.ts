import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { startBackend } from '../src/entry/backend.js';
import { loadConfig } from '../src/core/config.js';
import { createDatabase } from '../src/db/database.js';
import { createLogger } from '../src/core/logger.js';
import { databaseOptions } from '../src/process/open-database.js';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy.js';
import { createTestDatabaseUrl } from './support/harness.js';

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
