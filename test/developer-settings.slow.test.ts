import { once } from 'node:events';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyCheckout } from './support/checkout-copy.js';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

/**
 * What a developer's shell and the checkout's `.env` may hold while they run the suite: settings
 * for their own `npm start`, each of which would change a test's outcome if it reached one (a
 * server elsewhere, a port, a data folder, a Stripe key, a second HTTP process), and values the
 * configuration refuses outright.
 */
const SHELL = {
  DATABASE_URL: 'postgres://shell:shell@127.0.0.1:1/shell',
  PORT: '1',
  EMBEDDED_PG_PORT: '1',
  EMBEDDED_PG_DATA_DIR: '/proc/shell-data',
  STRIPE_SECRET_KEY: 'sk_test_from_the_shell',
  WEB_CONCURRENCY: '3',
  JWT_SECRET: 'short',
};
const DOT_ENV = `DATABASE_URL=postgres://dotenv:dotenv@127.0.0.1:2/dotenv
PORT=2
EMBEDDED_PG_DATA_DIR=/proc/dotenv-data
LOG_LEVEL=loud
DB_POOL_MAX=0
RUN_WORKERS=maybe
STRIPE_SECRET_KEY=sk_test_from_dotenv
`;

/**
 * Test files that start `npm start`'s entry point (checkout.startup), server processes of the load
 * tool (budget-leases.naive) and an in-process backend (contracts).
 */
const FILES = ['test/checkout.startup.slow.test.ts', 'test/budget-leases.naive.test.ts', 'test/contracts.test.ts'];

describe("a developer's shell and .env", () => {
  let root: string;
  let copy: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-settings-'));
    await chmod(root, 0o755);
    copy = path.join(root, 'project');
    await copyCheckout(copy);
    await writeFile(path.join(copy, '.env'), DOT_ENV);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('change no test outcome: a child run of tests that start the server, server processes and a backend passes', async () => {
    const shell = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(VITEST|ENV_FILE$|TEST_)/.test(name)));
    const child = spawnRecorded(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', ...FILES], {
      cwd: copy,
      env: { ...shell, ...SHELL, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = captureOutput(child);
    const [code] = (await once(child, 'close')) as [number | null];
    expect(output()).toMatch(/Test Files +3 passed \(3\)/);
    expect(code, output()).toBe(0);
  });
});
