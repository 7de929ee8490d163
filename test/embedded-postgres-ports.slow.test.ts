import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { EmbeddedPostgresPortTakenError, startEmbeddedPostgres, type EmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { spawnRecorded } from './support/processes.js';
import { bannerPort, captureOutput, runScript, spawnScript, stopScript } from './support/scripts.js';
import { waitFor } from './support/wait.js';

/**
 * The embedded PostgreSQL knows its own server: on a port where another PostgreSQL already
 * listens (a developer's own, with trust authentication, as many local installs have) it refuses,
 * and writes nothing there. And the suite never races itself for ports: servers that can listen
 * on port 0 do, and a PostgreSQL, which cannot, is started again on another port when one is
 * taken before it binds.
 */
const log = createLogger('silent');

/** What a foreign server holds: its databases, and the tables of its `postgres` database. */
async function contentsOf(url: string): Promise<{ databases: string[]; tables: string[] }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const databases = await client.query<{ name: string }>('select datname as name from pg_database order by 1');
    const tables = await client.query<{ name: string }>(
      "select relname as name from pg_class where relnamespace = 'public'::regnamespace order by 1",
    );
    return { databases: databases.rows.map((row) => row.name), tables: tables.rows.map((row) => row.name) };
  } finally {
    await client.end();
  }
}

/** A PostgreSQL that is not ours to use: trust authentication, so any client that reaches it gets in. */
async function startForeignPostgres(dataDir: string): Promise<{ server: EmbeddedPostgres; url: string }> {
  const server = await startEmbeddedPostgres({ dataDir, port: 0, log, ephemeral: true });
  await writeFile(path.join(server.dataDir, 'pg_hba.conf'), 'host all all 127.0.0.1/32 trust\n');
  const admin = new pg.Client({ connectionString: server.connectionString() });
  await admin.connect();
  await admin.query('select pg_reload_conf()');
  await admin.end();
  const url = `postgres://postgres@127.0.0.1:${server.port}/postgres`;
  // The reload is done once a new session, forked after it, gets in with no password.
  await waitFor(
    async () => {
      const probe = new pg.Client({ connectionString: url });
      probe.on('error', () => {});
      return probe.connect().then(
        () => probe.end().then(() => true),
        () => probe.end().then(() => undefined),
      );
    },
    'trust authentication',
    60_000,
  );
  return { server, url };
}

/** A cluster of ours that exists, made on a port of its own and stopped again. */
async function existingCluster(dataDir: string): Promise<string> {
  const ours = await startEmbeddedPostgres({ dataDir, port: 0, log, ephemeral: true });
  await ours.stop();
  return dataDir;
}

async function noPostmasterRuns(dataDir: string): Promise<boolean> {
  try {
    const pid = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

describe('the embedded PostgreSQL on a port another PostgreSQL (trust authentication) holds', () => {
  let root: string;
  let foreign: { server: EmbeddedPostgres; url: string };
  let before: { databases: string[]; tables: string[] };
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-ports-'));
    // The embedded servers run as their own user, which must be able to enter the folder.
    await chmod(root, 0o755);
    foreign = await startForeignPostgres(path.join(root, 'foreign'));
    before = await contentsOf(foreign.url);
  });
  afterAll(async () => {
    await foreign?.server.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('startEmbeddedPostgres refuses to start an existing cluster there, naming the port and EMBEDDED_PG_PORT, and writes nothing to it', async () => {
    const dataDir = await existingCluster(path.join(root, 'existing'));
    const port = foreign.server.port;
    const started = startEmbeddedPostgres({ dataDir, port, log, ephemeral: true });
    await expect(started).rejects.toThrow(EmbeddedPostgresPortTakenError);
    await expect(started).rejects.toThrow(new RegExp(`Port ${port} of the embedded PostgreSQL is taken .*EMBEDDED_PG_PORT`));
    await expect(started).rejects.toThrow(/could not bind/);
    expect(await contentsOf(foreign.url)).toEqual(before);
    expect(await noPostmasterRuns(dataDir)).toBe(true);
  });

  it('refuses a new cluster there before anything is written: no data folder is made', async () => {
    const dataDir = path.join(root, 'never-made');
    await expect(startEmbeddedPostgres({ dataDir, port: foreign.server.port, log, ephemeral: true })).rejects.toThrow(
      EmbeddedPostgresPortTakenError,
    );
    expect(existsSync(dataDir)).toBe(false);
    expect(await contentsOf(foreign.url)).toEqual(before);
  });

  it.each([
    ['a new data folder', async () => path.join(root, 'npm-new')],
    ['an existing cluster', () => existingCluster(path.join(root, 'npm-existing'))],
  ])('npm start with %s exits 1, naming the port and EMBEDDED_PG_PORT, with no migration or demo data there', async (_, folder) => {
    const port = foreign.server.port;
    const { code, output } = await runScript('src/entry/main.ts', {
      EMBEDDED_PG_PORT: String(port),
      EMBEDDED_PG_DATA_DIR: await folder(),
      PORT: '0',
      RUN_WORKERS: 'false',
    });
    expect(code, output).toBe(1);
    expect(output).toContain(`Port ${port} of the embedded PostgreSQL is taken by another program: set EMBEDDED_PG_PORT`);
    expect(output).not.toContain('embedded PostgreSQL is ready');
    expect(output).not.toContain('migrations applied');
    expect(await contentsOf(foreign.url)).toEqual(before);
  });
});

describe("npm start's first start", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-first-start-'));
    await chmod(root, 0o755);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('says it is creating the cluster while it does, not after', async () => {
    const dataDir = path.join(root, 'postgres');
    const server = spawnScript('src/entry/main.ts', {
      EMBEDDED_PG_PORT: '0',
      EMBEDDED_PG_DATA_DIR: dataDir,
      PORT: '0',
      RUN_WORKERS: 'false',
    });
    const output = captureOutput(server);
    try {
      await waitFor(() => (/creating the embedded PostgreSQL cluster/.test(output()) ? true : undefined), 'the first-start line', 120_000);
      // Seen while the cluster is being made: no server of it runs yet.
      expect(existsSync(path.join(dataDir, 'postmaster.pid'))).toBe(false);
      expect(output()).not.toContain('embedded PostgreSQL is ready');
      await waitFor(() => (bannerPort(output()) ? true : undefined), 'the banner', 120_000);
    } finally {
      await stopScript(server);
    }
  });
});

/** The rest of a busy suite: up to 2,000 servers listening at once on ports the kernel picks, each for a moment. */
const PORT_CHURN = `
const net = require('node:net');
const held = [];
function next() {
  const server = net.createServer();
  server.on('error', () => setImmediate(next));
  server.listen(0, '127.0.0.1', () => {
    held.push(server);
    if (held.length > 2000) held.shift().close();
    setImmediate(next);
  });
}
for (let i = 0; i < 8; i++) next();
`;
const BUSY_LOOP = 'for (;;) {}';
const NEIGHBOUR = 'test/support/port-neighbour.ts';
const ROUNDS = 10;
/** The naive twin runs until its first failure: at the churn's usual clash rate that is within a few rounds. */
const NAIVE_ROUNDS = 60;

interface Round {
  round: number;
  postgresPort?: number;
  error?: string;
}

/** Two neighbours (two test files) at once, each up to `rounds` rounds, beside the churn and two busy loops. */
async function runNeighbours(root: string, mode: 'own' | 'fixed', rounds: number) {
  const others = [PORT_CHURN, BUSY_LOOP, BUSY_LOOP].map((code) => spawnRecorded(process.execPath, ['-e', code], { stdio: 'ignore' }));
  try {
    return await Promise.all(
      ['a', 'b'].map(async (name) => {
        const child = spawnScript(NEIGHBOUR, {}, [path.join(root, `${mode}-${name}`), String(rounds), mode]);
        const output = captureOutput(child);
        const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
        const lines = output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Round & { msg?: string });
        return {
          code,
          rounds: lines.filter((line) => line.round !== undefined),
          retried: lines.filter((line) => line.msg === 'another program took the port first; trying another').length,
        };
      }),
    );
  } finally {
    for (const other of others) other.kill('SIGKILL');
  }
}

describe('two test files starting servers at once, round after round, under two busy loops and a churn of ports', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-neighbours-'));
    await chmod(root, 0o755);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('never meet: every round reaches its own PostgreSQL and its own HTTP server; a port taken first is tried again', async ({
    annotate,
  }) => {
    const neighbours = await runNeighbours(root, 'own', ROUNDS);
    for (const neighbour of neighbours) {
      expect(
        neighbour.rounds.filter((round) => round.error),
        JSON.stringify(neighbour.rounds),
      ).toEqual([]);
      expect(neighbour.rounds).toHaveLength(ROUNDS);
      expect(neighbour.code).toBe(0);
    }
    await annotate(
      `${2 * ROUNDS} PostgreSQL starts on port 0 beside the churn: ${neighbours.reduce((sum, n) => sum + n.retried, 0)} ports taken first, each tried again`,
      'figures',
    );
  });

  it('the naive twin, a PostgreSQL port picked beforehand as the suite once did, fails under the same churn', async () => {
    const neighbours = await runNeighbours(root, 'fixed', NAIVE_ROUNDS);
    const failed = neighbours.flatMap((neighbour) => neighbour.rounds.filter((round) => round.error));
    expect(failed.length).toBeGreaterThan(0);
    expect(failed[0]!.error).toMatch(/is taken by another program/);
  });
});
