import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, open, rm, statfs, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { createLogger } from '../src/core/logger.js';
import { CreateCampaignDocument, CreateContractDocumentDocument, IssueCouponDocument } from './generated/graphql.js';
import { LoadClient, runLanes, runReleasedTogether, type GraphQLReply } from './load/client.js';
import { asTenantAdmin, asUser, createTestBackend, gqlOk, serveOverHttp, type TestBackend } from './support/harness.js';
import { captureLog } from './support/log-capture.js';
import { migrateDatabaseAt } from './support/tool-database.js';
import { waitFor } from './support/wait.js';

const TENANT = 'resources';
/** What /ready must answer within, whatever the database is doing (a load balancer's check times out). */
const READY_WITHIN_MS = 1_000;
const CONCURRENCY = 8;
const RESEND_ROUNDS = 5;

interface ReadySample {
  status: number;
  ms: number;
  /** How long /health took, sent at the same moment: what any answer of this process took then. */
  healthMs: number;
  /** When the answer arrived (epoch ms). */
  answeredAt: number;
}

async function timedGet(url: string): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  await response.arrayBuffer();
  return { status: response.status, ms: Date.now() - started };
}

/**
 * /ready beside /health, sent at the same moment: on a machine this busy a process may take a
 * second to answer anything, so the figures say how much of a slow /ready was /ready's own.
 */
async function sampleReady(base: string): Promise<ReadySample> {
  const [ready, health] = await Promise.all([timedGet(`${base}/ready`), timedGet(`${base}/health`)]);
  return { status: ready.status, ms: ready.ms, healthMs: health.ms, answeredAt: Date.now() };
}

const beyondHealth = (samples: ReadySample[]) => Math.max(...samples.map((s) => s.ms - s.healthMs));

/** Samples /ready every `everyMs` until stopped. */
function readySampler(base: string, everyMs = 100) {
  const samples: ReadySample[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      try {
        samples.push(await sampleReady(base));
      } catch {
        // No answer at all counts as a failed sample; the server has gone (a failed test's teardown) or refused.
        samples.push({ status: 0, ms: Infinity, healthMs: 0, answeredAt: Date.now() });
        return;
      }
      await sleep(everyMs);
    }
  })();
  return {
    samples,
    async stop() {
      running = false;
      await done;
      return samples;
    },
  };
}

/**
 * How long the server took over each /ready, by its own request log (debug level): what it
 * answers within, apart from the client's and the machine's scheduling, which on a busy shared
 * machine alone can take a second.
 */
const serverReadyMs = (lines: Record<string, unknown>[]) =>
  lines.filter((line) => line['msg'] === 'request completed' && line['path'] === '/ready').map((line) => Number(line['durationMs']));

interface Sent {
  kind: 'document' | 'coupon';
  index: number;
  reply: GraphQLReply;
  /** When the answer arrived (epoch ms). */
  answeredAt: number;
}

const outcome = (s: Sent) => String(s.reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');
const reasonOf = (s: Sent) => String(s.reply.body.errors?.[0]?.extensions?.['reason'] ?? '');

/** A PostgreSQL of the test's own, the tenant, a contract and a campaign, and the backend over it. */
async function startScene(postgres: EmbeddedPostgres, env: Record<string, string>, logger = createLogger('silent')) {
  const url = postgres.connectionString('postgres');
  await migrateDatabaseAt(url);
  const backend = await createTestBackend({ databaseUrl: url, log: logger, env });
  await backend.sql.query("insert into tenants (id, name, monthly_cap_yen) values ($1, 'Resources', 1000000000)", [TENANT]);
  const contractId = (
    await backend.sql.query<{ id: string }>("insert into contracts (tenant_id, title) values ($1, 'C') returning id", [TENANT])
  ).rows[0]!.id;
  await gqlOk(
    backend.app.fetch,
    CreateCampaignDocument,
    { input: { id: 'big', name: 'Big', discountYen: 1, budgetYen: 1_000_000_000 } },
    asTenantAdmin(TENANT),
  );
  const served = await serveOverHttp(backend);
  const client = new LoadClient(served.url, CONCURRENCY);
  await client.open();
  const base = new URL(served.url).origin;
  /** Request `index`: an even one creates a document, an odd one issues a coupon to a member of its own; its key is its index. */
  const send = (index: number, attempt: string) => async (): Promise<Sent> => {
    const kind = index % 2 === 0 ? 'document' : 'coupon';
    const headers = {
      ...asUser(TENANT, `member-${index}`),
      'idempotency-key': `write-${index}`,
      'x-request-id': `write-${index}-${attempt}`,
    };
    const reply =
      kind === 'document'
        ? await client.graphql(print(CreateContractDocumentDocument), { input: { contractId } }, headers)
        : await client.graphql(print(IssueCouponDocument), { input: { campaignId: 'big' } }, headers);
    return { kind, index, reply, answeredAt: Date.now() };
  };
  return { backend, served, client, base, send };
}

/**
 * Resends every TRY_AGAIN with its key, as a client does, then checks with SQL that every key
 * completed exactly once: each document acknowledged exists, the numbers have no gap, one coupon
 * per member who was told ISSUED.
 */
async function expectNothingLost(backend: TestBackend, send: (index: number, attempt: string) => () => Promise<Sent>, replies: Sent[]) {
  let unfinished = replies.filter((s) => outcome(s) === 'TRY_AGAIN');
  for (let round = 1; unfinished.length > 0 && round <= RESEND_ROUNDS; round++) {
    const resent = await runReleasedTogether(
      unfinished.map((s) => send(s.index, `resend-${round}`)),
      CONCURRENCY,
    );
    expect(resent.filter((s) => !['OK', 'TRY_AGAIN'].includes(outcome(s))).map(outcome)).toEqual([]);
    unfinished = resent.filter((s) => outcome(s) === 'TRY_AGAIN');
  }
  expect(unfinished.map((s) => s.index)).toEqual([]);
  for (const s of replies.filter((r) => r.kind === 'document' && outcome(r) === 'OK')) {
    const id = (s.reply.body.data?.['createContractDocument'] as { document: { id: string } }).document.id;
    expect((await backend.sql.query('select 1 from contract_documents where id = $1', [id])).rowCount).toBe(1);
  }
  const documentKeys = replies.filter((s) => s.kind === 'document').length;
  const couponKeys = replies.length - documentKeys;
  const documents = await backend.sql.query<{ doc_number: number }>(
    'select doc_number from contract_documents where tenant_id = $1 order by 1',
    [TENANT],
  );
  expect(documents.rows.map((r) => r.doc_number)).toEqual(Array.from({ length: documentKeys }, (_, i) => 10_000_000 + i));
  const coupons = await backend.sql.query<{ n: number; members: number }>(
    'select count(*)::int as n, count(distinct member_id)::int as members from coupons where tenant_id = $1',
    [TENANT],
  );
  expect(coupons.rows[0]).toEqual({ n: couponKeys, members: couponKeys });
}

/**
 * The disk under the cluster fills up: a tmpfs of its own, filled to a few hundred kilobytes with
 * a ballast file, then by the requests' own writes. The WAL lives beside it on the ordinary disk:
 * a WAL that cannot grow makes PostgreSQL PANIC and restart, which is a database outage
 * (database-outage.test.ts, faults.slow.test.ts), while a full disk under the tables is what makes
 * every insert fail with 53100 and leaves the database answering.
 */
describe('the disk under the database fills up', () => {
  let root: string;
  let disk: string;
  let mounted = false;
  let mountRefused = '';
  let postgres: EmbeddedPostgres | undefined;
  let scene: Awaited<ReturnType<typeof startScene>> | undefined;
  const { lines, logger } = captureLog('debug');

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-disk-'));
    await chmod(root, 0o755);
    disk = path.join(root, 'disk');
    await mkdir(disk);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m,mode=0755', 'tmpfs', disk], { stdio: 'pipe' });
      mounted = true;
    } catch (error) {
      mountRefused = String((error as { stderr?: Buffer }).stderr ?? error).trim();
      return;
    }
    postgres = await startEmbeddedPostgres({
      dataDir: path.join(disk, 'data'),
      port: 0,
      log: createLogger('silent'),
      ephemeral: true,
    });
    // The WAL onto the ordinary disk (see above), the way a production cluster keeps it on a volume of its own.
    await postgres.stop();
    const walDir = path.join(root, 'wal');
    execFileSync('mv', [path.join(postgres.dataDir, 'pg_wal'), walDir]);
    await symlink(walDir, path.join(postgres.dataDir, 'pg_wal'));
    await postgres.restart();
    scene = await startScene(postgres, { DB_POOL_MAX: '4', REQUEST_DEADLINE_MS: '5000', DB_HEALTH_CHECK_INTERVAL_MS: '300' }, logger);
  });

  afterAll(async () => {
    scene?.client.close();
    await scene?.served.server.close();
    await scene?.backend.close();
    await postgres?.stop();
    if (mounted) execFileSync('umount', ['-l', disk]);
    await rm(root, { recursive: true, force: true });
  });

  it('every write answers data or TRY_AGAIN naming the disk, /ready is 503 while writes fail and 200 once space is freed, nothing acknowledged is lost', async ({
    annotate,
    skip,
  }) => {
    if (!mounted) return skip(`mounting a tmpfs was refused (${mountRefused}): this test needs root, as CI has`);
    const { backend, base, send } = scene!;

    // Leave about 256 kB: the requests' own inserts take the rest.
    const ballast = path.join(disk, 'ballast');
    const free = async () => {
      const stats = await statfs(disk);
      return stats.bavail * stats.bsize;
    };
    const file = await open(ballast, 'w');
    const chunk = Buffer.alloc(1 << 20);
    try {
      while ((await free()) > 256 * 1024 + chunk.length) await file.write(chunk);
    } finally {
      await file.close();
    }
    await annotate(`disk: ${Math.round((await free()) / 1024)} kB free before the writes`);

    const sampler = readySampler(base);
    const replies: Sent[] = [];
    let next = 0;
    // Write until 40 writes have failed: by then the disk is full for good, not for want of one page.
    const failed = () => replies.filter((s) => outcome(s) !== 'OK').length;
    await runLanes(() => (failed() >= 40 || next >= 30_000 ? null : async () => replies.push(await send(next++, 'first')())), CONCURRENCY);
    expect(failed(), 'the disk never refused a write').toBeGreaterThanOrEqual(40);
    const refusals = (answers: Sent[]) => answers.filter((s) => reasonOf(s) === '53100').length;
    expect(replies.filter((s) => outcome(s) !== 'OK' && reasonOf(s) !== '53100').map((s) => s.reply.body.errors)).toEqual([]);
    const firstRefusal = replies.find((s) => outcome(s) !== 'OK')!;
    await annotate(
      `first refusal: ${firstRefusal.reply.body.errors![0]!.message} (Retry-After ${firstRefusal.reply.headers['retry-after']})`,
    );

    // While the disk stays full: /ready says 503, and keeps saying it.
    await waitFor(async () => ((await sampleReady(base)).status === 503 ? true : undefined), '/ready 503 while the disk is full');
    const whileFull = readySampler(base);
    const moreWrites = await runReleasedTogether(
      Array.from({ length: 40 }, () => send(next++, 'first')),
      CONCURRENCY,
    );
    replies.push(...moreWrites);
    const fullSamples = await whileFull.stop();
    expect(moreWrites.filter((s) => outcome(s) === 'TRY_AGAIN').length).toBeGreaterThan(0);
    expect(fullSamples.map((s) => s.status).filter((status) => status !== 503)).toEqual([]);
    const shortageLogged = lines.filter((line) => String(line['msg']).includes('writes answer TRY_AGAIN and /ready 503')).length;

    // Space freed: /ready turns 200 without a restart, and the resent requests complete.
    await rm(ballast);
    await waitFor(async () => ((await sampleReady(base)).status === 200 ? true : undefined), '/ready 200 once space is freed', 20_000);
    const samples = await sampler.stop();

    const first503 = samples.find((s) => s.status === 503 && s.answeredAt >= firstRefusal.answeredAt);
    const counts: Record<string, number> = {};
    for (const s of replies) counts[`${outcome(s)} ${reasonOf(s)}`.trim()] = (counts[`${outcome(s)} ${reasonOf(s)}`.trim()] ?? 0) + 1;
    const slowest = Math.max(...samples.map((s) => s.ms), ...fullSamples.map((s) => s.ms));
    const beyond = beyondHealth([...samples, ...fullSamples]);
    const failedStatements = lines.find((line) => line['msg'] === 'the database accepts writes again')?.['failedStatements'];
    await annotate(
      `disk full: ${replies.length} writes, outcomes ${JSON.stringify(counts)}; /ready ${samples.filter((s) => s.status === 503).length} of ${samples.length} samples 503 (the first ${first503 ? first503.answeredAt - firstRefusal.answeredAt : '?'} ms after the first refusal), slowest ${slowest} ms as the client saw it (at most ${beyond} ms beyond /health's), ${Math.max(...serverReadyMs(lines))} ms in the server; shortage logged ${shortageLogged} times for ${failedStatements} failed statements`,
    );
    expect(Object.keys(counts).filter((key) => key !== 'OK' && !key.startsWith('TRY_AGAIN'))).toEqual([]);
    const answeredIn = serverReadyMs(lines);
    expect(answeredIn.length).toBeGreaterThanOrEqual(samples.length);
    expect(answeredIn.filter((ms) => ms >= READY_WITHIN_MS)).toEqual([]);
    // Once per episode, not once per failed request.
    expect(shortageLogged).toBeGreaterThanOrEqual(1);
    expect(shortageLogged).toBeLessThan(refusals(replies) / 10);
    expect(lines.filter((line) => line['msg'] === 'unexpected error, masked for the client')).toEqual([]);

    await expectNothingLost(backend, send, replies);
  });
});

/**
 * Another application opens connections until PostgreSQL refuses (max_connections), and keeps
 * every slot taken: whenever one frees up, it takes it. The server's own connections stay open,
 * but the one of its health check is lost (terminated, as a DBA's pg_terminate_backend or a
 * network blip would): without a free slot it cannot be opened again.
 */
describe('another application fills max_connections', () => {
  let root: string;
  let postgres: EmbeddedPostgres;
  let scene: Awaited<ReturnType<typeof startScene>>;
  const hog: pg.Client[] = [];
  const { lines, logger } = captureLog('debug');

  /** Opens connections until PostgreSQL refuses one; resolves with how many it opened. */
  const takeEverySlot = async () => {
    let opened = 0;
    for (;;) {
      const client = new pg.Client({ connectionString: postgres.connectionString('postgres'), application_name: 'hog' });
      client.on('error', () => {});
      try {
        await client.connect();
      } catch (error) {
        expect((error as { code?: string }).code).toBe('53300');
        return opened;
      }
      hog.push(client);
      opened++;
    }
  };

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-slots-'));
    await chmod(root, 0o755);
    postgres = await startEmbeddedPostgres({
      dataDir: path.join(root, 'data'),
      port: 0,
      log: createLogger('silent'),
      ephemeral: true,
      maxConnections: 30,
    });
    scene = await startScene(postgres, { DB_POOL_MAX: '4', REQUEST_DEADLINE_MS: '5000', DB_HEALTH_CHECK_INTERVAL_MS: '300' }, logger);
  });

  afterAll(async () => {
    await Promise.all(hog.map((client) => client.end().catch(() => {})));
    scene?.client.close();
    await scene?.served.server.close();
    await scene?.backend.close();
    await postgres?.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('the server keeps serving on the connections it holds, and /ready says 200 in every sample, each within 1 s', async ({ annotate }) => {
    const { backend, base, send } = scene;
    // The pool holds all its connections (four at once), as a server under steady load does.
    await Promise.all(Array.from({ length: 4 }, () => sql`select pg_sleep(0.2)`.execute(backend.database.db)));
    expect(backend.database.pool.counts.totalCount).toBe(4);
    // The test's own pool for counting rows keeps one connection, opened now.
    await backend.sql.query('select 1');

    const held = await takeEverySlot();
    const sampler = readySampler(base);
    const replies: Sent[] = [];
    let next = 0;
    const load = runLanes((index) => (index >= 400 ? null : async () => replies.push(await send(next++, 'first')())), 4);

    // The health check's connection lost, and its slot taken again at once.
    const healthBackends = () =>
      hog[0]!.query<{ pid: number }>("select pid from pg_stat_activity where application_name = 'test-app-health'").then((r) => r.rows);
    for (let tries = 0; (await healthBackends()).length > 0 && tries < 20; tries++) {
      // pg_terminate_backend(pid, timeout) waits until the backend has exited: its slot is free then.
      for (const { pid } of await healthBackends()) await hog[0]!.query('select pg_terminate_backend($1, 5000)', [pid]);
      await takeEverySlot();
    }
    expect(await healthBackends()).toEqual([]);
    await load;
    const samples = await sampler.stop();

    const counts: Record<string, number> = {};
    for (const s of replies) counts[`${outcome(s)} ${reasonOf(s)}`.trim()] = (counts[`${outcome(s)} ${reasonOf(s)}`.trim()] ?? 0) + 1;
    const statuses: Record<number, number> = {};
    for (const s of samples) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
    const slowest = Math.max(...samples.map((s) => s.ms));
    const beyond = beyondHealth(samples);
    await annotate(
      `max_connections full (another application holds ${hog.length} of 30): ${replies.length} writes, outcomes ${JSON.stringify(counts)}; /ready ${JSON.stringify(statuses)} in ${samples.length} samples, slowest ${slowest} ms as the client saw it (at most ${beyond} ms beyond /health's), ${Math.max(...serverReadyMs(lines))} ms in the server`,
    );
    expect(held).toBeGreaterThan(0);
    expect(counts).toEqual({ OK: 400 });
    expect(samples.length).toBeGreaterThan(5);
    expect(samples.map((s) => s.status).filter((status) => status !== 200)).toEqual([]);
    const answeredIn = serverReadyMs(lines);
    expect(answeredIn.length).toBeGreaterThanOrEqual(samples.length);
    expect(answeredIn.filter((ms) => ms >= READY_WITHIN_MS)).toEqual([]);
    // The other application gone, the test counts with connections of its own.
    await Promise.all(hog.splice(0).map((client) => client.end()));
    await expectNothingLost(backend, send, replies);
  });
});
