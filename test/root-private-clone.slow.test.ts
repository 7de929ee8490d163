import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdtemp, readlink, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_HEADERS } from '../src/http/graphiql.js';
import { copyCheckout } from './support/checkout-copy.js';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

const run = promisify(execFile);
const asRoot = process.getuid?.() === 0;
if (!asRoot) console.warn('root-private-clone test skipped: it is about running as root (CI runs it)');

/** The environment of a person's shell: none of this test run's own settings. */
function shellEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(VITEST|DATABASE_URL$|PGBOUNCER$|NODE_ENV$|ENV_FILE$|TEST_)/.test(name)),
  );
  return { ...env, NO_COLOR: '1', ...extra };
}

/**
 * As root, in a folder nobody else may enter (a `mktemp -d` folder, a clone under /root): the
 * postgres user cannot reach the project's binaries or its `.data/`, and `npm test` and
 * `npm start` must still work.
 */
describe.skipIf(!asRoot)('as root, from a clone in a private folder', () => {
  let root: string;
  let clone: string;
  let shared: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-private-'));
    clone = path.join(root, 'clone');
    await copyCheckout(clone);
    shared = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-shared-'));
    await chmod(shared, 0o755);
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
    if (shared) await rm(shared, { recursive: true, force: true });
  });

  it('the folder is private: others may not enter it', async () => {
    expect((await stat(root)).mode & 0o077).toBe(0);
  });

  it('npm test runs a suite that touches data', async () => {
    const { stdout } = await run('npm', ['test', '--', 'test/contracts.test.ts'], {
      cwd: clone,
      env: shellEnv({ CI: 'true', EMBEDDED_PG_SHARED_DIR: shared }),
      maxBuffer: 10_000_000,
    });
    expect(stdout.replace(/\x1b\[[\d;]*m/g, '')).toMatch(/Tests +\d+ passed/);
    const copies = path.join(shared, 'binaries');
    expect(existsSync(copies)).toBe(true);
  });

  it('npm start serves the demo data, saying in one line where the binaries and the data went', async () => {
    const child = spawnRecorded('npm', ['start'], {
      cwd: clone,
      env: shellEnv({
        NODE_ENV: 'development',
        LOG_LEVEL: 'info',
        PORT: '0',
        EMBEDDED_PG_PORT: '0',
        EMBEDDED_PG_SHARED_DIR: shared,
        RUN_WORKERS: 'false',
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = captureOutput(child);
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      for (const deadline = Date.now() + 90_000; !/GraphQL and GraphiQL: http/.test(output()) && Date.now() < deadline;) {
        if (child.exitCode !== null) break;
        await sleep(100);
      }
      const base = /(http:\/\/localhost:\d+)\/graphql/.exec(output())?.[1];
      expect(base, output()).toBeDefined();
      expect((await fetch(`${base}/ready`)).status).toBe(200);
      const response = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...DEMO_HEADERS },
        body: JSON.stringify({
          query:
            'mutation { createContractDocument(input: {contractId: "11111111-1111-4111-8111-111111111111"}) { document { docNumber } } }',
        }),
      });
      expect(await response.json()).toEqual({ data: { createContractDocument: { document: { docNumber: 10_000_000 } } } });
      const dataDir = path.join(clone, '.data', 'postgres');
      expect((await lstat(dataDir)).isSymbolicLink()).toBe(true);
      expect(await readlink(dataDir)).toContain(path.join(shared, 'data'));
    } finally {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
    const moved = output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => (JSON.parse(line) as { msg: string }).msg)
      .filter((message) => message.startsWith('PostgreSQL runs as the "postgres" user, which cannot enter'));
    expect(moved, output()).toHaveLength(1);
    expect(moved[0]).toContain(`cannot enter ${root}`);
    expect(moved[0]).toContain(`binaries from ${path.join(shared, 'binaries')}`);
    expect(moved[0]).toContain(`data in ${path.join(shared, 'data')}`);
  });
});
