import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { createLogger } from '../src/core/logger.js';
import { startBackend } from '../src/entry/backend.js';
import { listen } from '../src/http/node-server.js';
import { throughProxy } from './load/delay-proxy.js';
import { createTestBackend, createTestDatabaseUrl } from './support/harness.js';
import { startHoldingProxy } from './support/holding-proxy.js';

describe('/health and /ready', () => {
  it('/health answers while the process lives; /ready only while the database answers', async () => {
    const healthy = await createTestBackend();
    // Nothing listens on port 1: this backend's database is down.
    const orphaned = await createTestBackend({
      databaseUrl: 'postgres://nobody:nothing@127.0.0.1:1/none',
      env: { DB_POOL_ACQUIRE_TIMEOUT_MS: '500' },
    });
    try {
      const get = (backend: typeof healthy, path: string) => backend.app.fetch(new Request(`http://test.local${path}`));
      expect((await get(healthy, '/health')).status).toBe(200);
      expect((await get(healthy, '/ready')).status).toBe(200);
      expect((await get(orphaned, '/health')).status).toBe(200);
      const ready = await get(orphaned, '/ready');
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ status: 'database unavailable' });
      expect((await get(healthy, '/nowhere')).status).toBe(404);
    } finally {
      await healthy.close();
      await orphaned.sql.end().catch(() => {});
      await orphaned.database.close();
    }
  });
});

describe('listening', () => {
  it('names the way out when the port is taken', async () => {
    const backend = await createTestBackend();
    const first = await listen(backend.app, 0, backend.log, '127.0.0.1', backend.config.server);
    try {
      await expect(listen(backend.app, first.port, backend.log, '127.0.0.1', backend.config.server)).rejects.toThrow(
        new RegExp(`Port ${first.port} is already in use: stop the other server or set PORT`),
      );
    } finally {
      await first.close();
      await backend.close();
    }
  });
});

describe('starting', () => {
  it('listens only once its first health check is in: the first /ready of a new process says ready', async () => {
    const databaseUrl = await createTestDatabaseUrl();
    const proxy = await startHoldingProxy(Number(new URL(databaseUrl).port));
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: throughProxy(databaseUrl, proxy.port), PORT: '0', RUN_WORKERS: 'false' });
    // The health pool's connection (backend.ts opens the database as 'mutation-backend') gets no
    // answer until the test delivers it: a check that would come in after the server listened.
    proxy.holdNextConnectionOf('mutation-backend-health');
    // As an HTTP process of the cluster starts (the rolling reload's): no health watch before
    // startBackend, so nothing but startBackend itself checks the database before a request asks.
    const starting = startBackend({ config, log: createLogger('silent'), seed: false, host: '127.0.0.1' });
    try {
      const first = await Promise.race([proxy.holding().then(() => 'health check begun'), starting.then(() => 'listening')]);
      expect(first).toBe('health check begun');
      proxy.deliver();
      const backend = await starting;
      const ready = await fetch(`http://127.0.0.1:${backend.http.port}/ready`);
      expect({ status: ready.status, body: await ready.json() }).toEqual({ status: 200, body: { status: 'ready' } });
    } finally {
      // A test that failed above still holds the check: its backend could not stop until it timed out.
      proxy.deliver();
      await (await starting).stop();
      await proxy.close();
    }
  });
});
