import { describe, expect, it } from 'vitest';
import { listen } from '../src/http/node-server.js';
import { createTestBackend } from './support/harness.js';

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
