import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { createLogger } from '../src/core/logger.js';
import { captureOutput, spawnScript, stopScript } from './support/scripts.js';

const lines = (output: string, message: string) => output.split('\n').filter((line) => line.includes(message));

/** Waits for what the server prints; on a busy machine its start and its checks take what they take, up to the test's timeout. */
async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 120_000) {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(100)) if (await condition()) return;
  throw new Error(`timed out waiting for ${what}`);
}

describe('a server whose database goes away', () => {
  it('says so in its log at every check while it is away, and serves again once it is back', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-outage-'));
    await chmod(root, 0o755);
    const database = await startEmbeddedPostgres({
      dataDir: path.join(root, 'data'),
      port: 0,
      log: createLogger('warn'),
      ephemeral: true,
    });
    const server = spawnScript('src/entry/main.ts', {
      DATABASE_URL: database.connectionString(),
      DB_HEALTH_CHECK_INTERVAL_MS: '300',
      RUN_WORKERS: 'false',
      PORT: '0',
    });
    const output = captureOutput(server);
    try {
      await until(() => /GraphQL and GraphiQL: http/.test(output()), 'the banner');
      const base = /(http:\/\/localhost:\d+)\/graphql/.exec(output())![1]!;
      expect(lines(output(), 'database unavailable')).toEqual([]);

      await database.stop();
      await until(() => lines(output(), 'database unavailable').length >= 3, 'three log lines about the outage');
      const outage = lines(output(), 'database unavailable').map(
        (line) => JSON.parse(line) as { level: string; port: number; downForMs: number },
      );
      expect(outage[0]).toMatchObject({ level: 'error', port: database.port });
      expect(outage.at(-1)!.downForMs).toBeGreaterThan(outage[0]!.downForMs);
      expect((await fetch(`${base}/ready`)).status).toBe(503);

      await database.restart();
      await until(() => lines(output(), 'database available again').length === 1, 'the line saying it is back');
      expect((await fetch(`${base}/ready`)).status).toBe(200);
      const created = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-hasura-role': 'operator' },
        body: JSON.stringify({ query: 'mutation { createTenant(input: {id: "after-outage", name: "Back"}) { tenant { id } } }' }),
      });
      expect(await created.json()).toEqual({ data: { createTenant: { tenant: { id: 'after-outage' } } } });
    } finally {
      await stopScript(server);
      await database.stop();
      await rm(root, { recursive: true, force: true });
    }
  });
});
