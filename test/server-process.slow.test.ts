import type { ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { print } from 'graphql';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { DEMO_HEADERS } from '../src/http/graphiql.js';
import { embeddedConnectionString } from '../src/dev/embedded-postgres.js';
import { captureOutput, runScript, spawnScript, stopScript } from './support/scripts.js';

const DEMO_CONTRACT = '11111111-1111-4111-8111-111111111111';

interface Started {
  child: ChildProcess;
  output: () => string;
  base: string;
  exited: Promise<number | null>;
}

/** Runs `npm start`'s entry point as a user would, and waits for the URL it prints. */
async function startServer(env: Record<string, string>): Promise<Started> {
  const child = spawnScript('src/entry/main.ts', env);
  const output = captureOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /GraphQL and GraphiQL: (http:\/\/localhost:\d+)\/graphql/.exec(output());
      if (match) {
        clearInterval(timer);
        resolve(match[1]!);
      }
      if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`server exited: ${output()}`));
      }
    }, 50);
  });
  return { child, output, base, exited };
}

/** A database of its own: an embedded PostgreSQL in a new folder, on the port its start picks. */
interface OwnDatabase {
  dataRoot: string;
  env: { EMBEDDED_PG_PORT: string; EMBEDDED_PG_DATA_DIR: string };
}

async function ownDatabase(name: string): Promise<OwnDatabase> {
  const dataRoot = await mkdtemp(path.join(os.tmpdir(), `mutation-backend-${name}-`));
  // The embedded server runs as its own user, which must be able to enter the folder.
  await chmod(dataRoot, 0o755);
  return { dataRoot, env: { EMBEDDED_PG_PORT: '0', EMBEDDED_PG_DATA_DIR: path.join(dataRoot, 'postgres') } };
}

/** After all, whatever the hooks did: a start that timed out left no server (its process ends with the file). */
async function stopAndRemove(server: Started | undefined, database: OwnDatabase | undefined): Promise<void> {
  if (server) await stopScript(server.child);
  if (database) await rm(database.dataRoot, { recursive: true, force: true });
}

const createDocument = (base: string) =>
  fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...DEMO_HEADERS },
    body: JSON.stringify({ query: print(CreateContractDocumentDocument), variables: { input: { contractId: DEMO_CONTRACT } } }),
  });

describe('npm start on a fresh machine (embedded PostgreSQL)', () => {
  let database: OwnDatabase;
  let server: Started;

  beforeAll(async () => {
    database = await ownDatabase('start');
    server = await startServer({ ...database.env, PORT: '0', LOCK_TIMEOUT_MS: '20000', RUN_WORKERS: 'false' });
  });
  const sameDatabase = () => database.env;
  afterAll(() => stopAndRemove(server, database));

  it('migrates, loads the demo data, prints the headers and serves GraphQL, /health and /ready', async () => {
    expect(server.output()).toContain(JSON.stringify(DEMO_HEADERS));
    // Dev mode trusts x-hasura-* headers as sent: it listens on this machine only.
    expect(server.output()).toMatch(/Listening on: +127\.0\.0\.1:\d+ \(this machine only/);
    // The banner comes after the start-up lines it sums up, not in the middle of them.
    const output = server.output();
    expect(output.indexOf('migrations applied')).toBeGreaterThan(-1);
    expect(output.indexOf('migrations applied')).toBeLessThan(output.indexOf('Listening on'));
    expect((await fetch(`${server.base}/health`)).status).toBe(200);
    expect((await fetch(`${server.base}/ready`)).status).toBe(200);
    const graphiql = await fetch(`${server.base}/graphql`, { headers: { accept: 'text/html' } });
    expect(await graphiql.text()).toContain('GraphiQL');
    const response = await createDocument(server.base);
    const body = (await response.json()) as { data: { createContractDocument: { document: { docNumber: number } } } };
    expect(body.data.createContractDocument.document.docNumber).toBe(10_000_000);
  });

  it("prints the embedded database's connection string, and npm run db:url prints it alone for psql", async () => {
    const printed = /Database: +(postgres:\/\/\S+)/.exec(server.output())?.[1];
    const postmasterPort = (await readFile(path.join(database.env.EMBEDDED_PG_DATA_DIR, 'postmaster.pid'), 'utf8')).split('\n')[3];
    expect(printed).toMatch(new RegExp(`^postgres://postgres:[^@]+@127\\.0\\.0\\.1:${postmasterPort}/postgres$`));
    // The folder is not the default one: the banner names it in the command that finds it again.
    expect(server.output()).toContain(`(EMBEDDED_PG_DATA_DIR=${database.env.EMBEDDED_PG_DATA_DIR} npm run -s db:url prints it)`);
    const { code, output } = await runScript('src/entry/cli/db-url.ts', sameDatabase());
    expect(code).toBe(0);
    expect(output).toBe(`${printed}\n`);
    const client = new pg.Client({ connectionString: output.trim() });
    await client.connect();
    try {
      expect((await client.query('select count(*)::int as n from tenants')).rows).toEqual([{ n: 2 }]);
    } finally {
      await client.end();
    }
  });

  it('a second npm start on the same data folder stops, naming the process that serves it and the variables to change', async () => {
    const second = await runScript('src/entry/main.ts', { ...sameDatabase(), PORT: '0' });
    expect(second.code).toBe(2);
    expect(second.output).toMatch(/is already served by process \d+ \(.*src\/entry\/main\.ts\)/);
    // EMBEDDED_PG_PORT=0 picks an unused port already: only the folder is named.
    expect(second.output).toContain('set EMBEDDED_PG_DATA_DIR to another folder (or set DATABASE_URL)');
    expect(second.output).not.toContain('EMBEDDED_PG_PORT to another port');
    expect((await fetch(`${server.base}/ready`)).status).toBe(200);
  });

  it('npm run worker attaches to the running database and delivers the outbox', async () => {
    expect(server.output()).toContain('Background workers:   off');
    const issued = await graphql(server.base, 'mutation { issueCoupon(input: {campaignId: "welcome"}) { status } }', DEMO_HEADERS);
    expect(issued).toEqual({ data: { issueCoupon: { status: 'ISSUED' } } });
    const pending = async () =>
      ((await graphql(server.base, '{ outboxStats { pending } }', ADMIN)) as { data: { outboxStats: { pending: number } } }).data
        .outboxStats.pending;
    expect(await pending()).toBe(1);

    const worker = spawnScript('src/entry/worker/main.ts', { ...sameDatabase(), OUTBOX_POLL_INTERVAL_MS: '50' });
    const output = captureOutput(worker);
    const closed = new Promise<number | null>((resolve) => worker.on('close', resolve));
    // The worker's own start (tsx, then the database) sets the pace: wait for its delivery or its end,
    // bounded only by the test's timeout, never by a guess at how fast this machine starts a process.
    const limit = Date.now() + 100_000;
    while ((await pending()) > 0 && worker.exitCode === null && Date.now() < limit) await sleep(100);
    expect(worker.exitCode, output()).toBeNull();
    expect(await pending(), output()).toBe(0);
    worker.kill('SIGTERM');
    expect(await closed).toBe(0);
    expect(output()).toContain('attached to the embedded PostgreSQL another process runs');
    expect(output()).toContain('outbox event delivered');
    expect((await fetch(`${server.base}/ready`)).status).toBe(200);
  });

  it('npm run reconcile exits 0 on a clean ledger and 1 on drift', async () => {
    const clean = await runScript('src/entry/cli/reconcile.ts', sameDatabase());
    expect(clean.output).toContain('ledger OK');
    expect(clean.code).toBe(0);
    const admin = new pg.Client({ connectionString: await embeddedUrl(database.env.EMBEDDED_PG_DATA_DIR) });
    await admin.connect();
    const drift = "update campaign_budget_slots set issued_yen = issued_yen + $1 where tenant_id = 'acme' and campaign_id = 'welcome'";
    await admin.query(drift, [500]);
    try {
      const drifted = await runScript('src/entry/cli/reconcile.ts', sameDatabase());
      expect(drifted.output).toContain('ledger DRIFT');
      expect(drifted.code).toBe(1);
    } finally {
      await admin.query(drift, [-500]);
      await admin.end();
    }
  });
});

describe('npm start stopped by SIGTERM', () => {
  let database: OwnDatabase;
  let server: Started;

  beforeAll(async () => {
    database = await ownDatabase('stop');
    server = await startServer({ ...database.env, PORT: '0', LOCK_TIMEOUT_MS: '20000', RUN_WORKERS: 'false' });
  });
  afterAll(() => stopAndRemove(server, database));

  it('on SIGTERM lets the request in flight finish, then stops itself and the database', async () => {
    // A first document makes the tenant's sequence row; holding that row keeps the next request in
    // flight when the signal arrives.
    const first = (await (await createDocument(server.base)).json()) as {
      data: { createContractDocument: { document: { docNumber: number } } };
    };
    expect(first.data.createContractDocument.document.docNumber).toBe(10_000_000);
    const admin = new pg.Client({ connectionString: await embeddedUrl(database.env.EMBEDDED_PG_DATA_DIR) });
    await admin.connect();
    await admin.query('begin');
    await admin.query("select * from document_sequences where tenant_id = 'acme' for update");
    const inFlight = createDocument(server.base);
    // In flight for certain: the server's transaction waits for the row this test holds.
    const waiting = async () =>
      (await admin.query("select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and pid <> pg_backend_pid()"))
        .rows[0].n;
    for (const deadline = Date.now() + 30_000; (await waiting()) === 0 && Date.now() < deadline;) await sleep(50);
    expect(await waiting()).toBe(1);
    server.child.kill('SIGTERM');
    // The request is still in flight once the server says it is stopping.
    while (!server.output().includes('shutting down')) await sleep(50);
    await admin.query('commit');
    await admin.end();
    const response = await inFlight;
    const body = (await response.json()) as { data: { createContractDocument: { document: { docNumber: number } } } };
    expect(body.data.createContractDocument.document.docNumber).toBe(10_000_001);
    expect(await server.exited).toBe(0);
    expect(server.output()).toContain('stopped');
    await expect(fetch(`${server.base}/health`)).rejects.toThrow();
  });
});

const ADMIN = { 'x-hasura-role': 'admin', 'x-hasura-tenant-id': 'acme' };

async function graphql(base: string, query: string, headers: Record<string, string>): Promise<unknown> {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query }),
  });
  return response.json();
}

/** The running embedded server's connection string, as db:url finds it. */
async function embeddedUrl(dataDir: string): Promise<string> {
  return (await embeddedConnectionString(dataDir, 0))!.url;
}

describe('WEB_CONCURRENCY=2 npm start (all cores)', () => {
  let database: OwnDatabase;
  let server: Started;
  beforeAll(async () => {
    database = await ownDatabase('cluster');
    server = await startServer({ ...database.env, PORT: '0', WEB_CONCURRENCY: '2' });
  });
  afterAll(() => stopAndRemove(server, database));

  it('one scrape of /metrics sums what both HTTP processes served, one set of workers runs, and SIGTERM stops them all', async () => {
    // Each new connection goes to the next HTTP process (node:cluster hands them out in turn),
    // so 21 requests on fresh connections reach both, 11 and 10. Every scrape, whichever process
    // answers it, must count all 21 and name both processes.
    const viewers = 21;
    for (let i = 0; i < viewers; i++) {
      const response = await fetch(`${server.base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close', ...DEMO_HEADERS },
        body: JSON.stringify({ query: '{ viewer { role } }' }),
      });
      expect(response.status).toBe(200);
    }
    for (let scrape = 0; scrape < 4; scrape++) {
      const metrics = await (await fetch(`${server.base}/metrics`, { headers: { connection: 'close' } })).text();
      expect(metrics).toMatch(new RegExp(`^graphql_request_duration_seconds_count\\{operation="viewer",outcome="OK"\\} ${viewers}$`, 'm'));
      const pids = new Set([...metrics.matchAll(/^db_pool_connections\{state="idle",pid="(\d+)"\}/gm)].map((m) => m[1]));
      expect(pids.size).toBe(2);
      expect(metrics.match(/^# TYPE db_pool_connections gauge$/gm)).toHaveLength(1);
    }

    // The same server, to the end: one set of background workers, and SIGTERM stops every process.
    expect(server.output()).toContain('HTTP processes:       2 (node:cluster, one port)');
    const created = await createDocument(server.base);
    expect(((await created.json()) as { data: unknown }).data).toBeTruthy();
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.output().match(/outbox relay started/g)).toHaveLength(1);
    expect(server.output().match(/"msg":"stopped"/g)?.length).toBe(3);
  });
});
