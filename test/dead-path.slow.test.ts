import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { HEALTH_CHECK_LIMIT_MS } from '../src/db/health.js';
import { LoadClient } from './load/client.js';
import {
  checkNothingLost,
  figures,
  loadAtRate,
  memberHeaders,
  pollReady,
  sendDocument,
  type Sample,
  type Trial,
} from './support/dead-path.js';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy.js';
import { createTestBackend, createTestDatabaseUrl, serveOverHttp, type TestBackend } from './support/harness.js';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

const PROJECT = fileURLToPath(new URL('..', import.meta.url));

/**
 * A network path between the server and PostgreSQL that stops carrying bytes without closing a
 * socket: what a dropped route or an old primary vanishing in a failover looks like to the
 * server. A fault proxy of the test's own (test/support/fault-proxy.ts) sits in between; the
 * server has only its own limits to go by. The deadline is shortened so that each trial takes
 * seconds; the figures at the default settings come from `tsx test/load/dead-path.ts`.
 */
const DEADLINE_MS = 3_000;
const SETTINGS = {
  REQUEST_DEADLINE_MS: String(DEADLINE_MS),
  STATEMENT_TIMEOUT_MS: '1500',
  LOCK_TIMEOUT_MS: '1000',
  IDLE_IN_TRANSACTION_TIMEOUT_MS: '3000',
  DB_POOL_ACQUIRE_TIMEOUT_MS: '1500',
  DB_POOL_CONNECT_TIMEOUT_MS: '2000',
  DB_HEALTH_CHECK_INTERVAL_MS: '500',
};
/** Low enough that a busy machine keeps up with it, high enough that a stall fills the pool and the admission queue. */
const RATE = 10;
/** Answers that come back OK before the fault begins: the trial measures the machine on them. */
const HEALTHY_ANSWERS = 10;

interface Setup {
  proxy: FaultProxy;
  backend: TestBackend;
  server: Awaited<ReturnType<typeof serveOverHttp>>['server'];
  client: LoadClient;
  trial: Trial;
  readyUrl: string;
  direct: pg.Pool;
}

let current: Setup | null = null;

async function setUp(tenantId: string): Promise<Setup> {
  const databaseUrl = await createTestDatabaseUrl();
  const target = new URL(databaseUrl);
  const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
  const direct = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  direct.on('error', () => {});
  await direct.query('insert into tenants (id, name) values ($1, $1)', [tenantId]);
  const contractId = (
    await direct.query<{ id: string }>("insert into contracts (tenant_id, title) values ($1, 'C') returning id", [tenantId])
  ).rows[0]!.id;
  const backend = await createTestBackend({ databaseUrl: proxy.url(databaseUrl), env: SETTINGS });
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, 200);
  await client.open();
  // Every connection of the pool opened and idle, as on a server that has been busy: those are what a fault catches.
  const reads = Array.from({ length: 3 * Number(backend.config.database.poolMax) }, () =>
    client.graphql('{ contracts(first: 1) { id } }', {}, memberHeaders(tenantId)),
  );
  // On a busy machine some wait too long for a turn (TRY_AGAIN); the others have opened the connections.
  for (const reply of await Promise.all(reads))
    expect(reply.body.errors?.map((e) => e.extensions?.['code']) ?? []).not.toContain('INTERNAL_SERVER_ERROR');
  current = {
    proxy,
    backend,
    server,
    client,
    direct,
    readyUrl: url.replace(/\/graphql$/, '/ready'),
    trial: { graphqlUrl: url, sql: direct, tenantId, contractId },
  };
  return current;
}

afterEach(async () => {
  if (!current) return;
  const { proxy, backend, server, client, direct } = current;
  current = null;
  client.close();
  // The proxy goes first: connections stuck on it end, so nothing below waits for them.
  await proxy.close();
  await server.close(1_000);
  await backend.close();
  await direct.end();
});

/**
 * Load at `rate` until HEALTHY_ANSWERS answers have come back OK (an event, however slow the
 * machine), which is when the trial's fault begins (`faultMs`, ms after the load started). How late
 * an answer may come past its deadline, `margin`, is the machine's own slowness measured on those
 * answers, plus a second.
 */
async function loadUntilHealthy(client: LoadClient, trial: Trial, rate: number, tag: string) {
  const healthy: Sample[] = [];
  let markHealthy!: () => void;
  const enough = new Promise<void>((resolve) => (markHealthy = resolve));
  const load = loadAtRate(client, trial, rate, Infinity, tag, (sample) => {
    if (sample.code !== 'OK' || healthy.length >= HEALTHY_ANSWERS) return;
    healthy.push(sample);
    if (healthy.length === HEALTHY_ANSWERS) markHealthy();
  });
  await enough;
  const faultMs = performance.now() - load.started;
  return { load, faultMs, margin: 1_000 + Math.max(...healthy.map((s) => s.latencyMs)) };
}

const sentBetween = (samples: Sample[], fromMs: number, toMs = Infinity) => samples.filter((s) => s.sentMs >= fromMs && s.sentMs < toMs);

describe('a dead network path between the server and PostgreSQL', () => {
  it('a blackhole longer than the deadline, under load: every request answers by its deadline, nothing is lost, and it serves again after', async ({
    annotate,
  }) => {
    const { proxy, client, trial } = await setUp('blackhole');
    const blackholeMs = 2.5 * DEADLINE_MS;
    const { load, faultMs, margin } = await loadUntilHealthy(client, trial, RATE, 'blackhole');
    proxy.blackhole();
    await sleep(blackholeMs);
    proxy.heal();
    const healedMs = performance.now() - load.started;
    // Serving again is judged on what is sent from a deadline (and the machine's slowness) after the heal.
    const servingAgainMs = healedMs + DEADLINE_MS + margin;
    load.endAt(servingAgainMs + DEADLINE_MS);
    const samples = await load.done;

    const healthy = samples.filter((s) => s.sentMs + s.latencyMs < faultMs);
    const inFlight = samples.filter((s) => s.sentMs < faultMs && s.sentMs + s.latencyMs > faultMs);
    const servingAgain = sentBetween(samples, servingAgainMs);
    await annotate(
      `blackhole of ${blackholeMs} ms at ${RATE}/s, deadline ${DEADLINE_MS} ms: healthy ${JSON.stringify(figures(healthy))}; ` +
        `in flight when it began ${JSON.stringify(figures(inFlight))}; during ${JSON.stringify(figures(sentBetween(samples, faultMs, healedMs)))}; ` +
        `after ${JSON.stringify(figures(sentBetween(samples, healedMs)))}`,
    );
    expect(new Set(samples.map((s) => s.code))).toEqual(new Set(['OK', 'TRY_AGAIN']));
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    for (const s of samples.filter((s) => s.code === 'TRY_AGAIN')) expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(servingAgain.length).toBeGreaterThan(0);
    expect(figures(servingAgain).codes, JSON.stringify(figures(servingAgain))).toEqual({ OK: servingAgain.length });
    expect(await checkNothingLost(client, trial, samples)).toEqual([]);
  });

  it('a blackhole for good: requests answer TRY_AGAIN by their deadline and then at once, and /ready says 503 within seconds', async ({
    annotate,
  }) => {
    const { proxy, client, trial, readyUrl } = await setUp('blackhole-for-good');
    const ready = pollReady(readyUrl, performance.now());
    const { load, faultMs, margin } = await loadUntilHealthy(client, trial, RATE / 2, 'for-good');
    proxy.blackhole();
    // Once the first two deadlines have passed the server knows: the settled phase, two deadlines long.
    const settledMs = faultMs + 2 * DEADLINE_MS;
    load.endAt(settledMs + 2 * DEADLINE_MS);
    const samples = await load.done;
    const polls = (await ready.stop()).map((poll) => ({ ...poll, atMs: poll.atMs - (load.started - ready.started) }));

    const firstUnready = polls.find((poll) => poll.atMs > faultMs && poll.status === 503);
    const unreadyAfterMs = firstUnready ? firstUnready.atMs - faultMs : Infinity;
    const settled = sentBetween(samples, settledMs);
    await annotate(
      `blackhole for good, deadline ${DEADLINE_MS} ms: /ready 503 after ${Math.round(unreadyAfterMs)} ms; ` +
        `during the first two deadlines ${JSON.stringify(figures(sentBetween(samples, faultMs, settledMs)))}; ` +
        `after ${JSON.stringify(figures(settled))}`,
    );
    // The health check runs every 500 ms and gives its select 1 HEALTH_CHECK_LIMIT_MS.
    expect(unreadyAfterMs).toBeLessThan(500 + HEALTH_CHECK_LIMIT_MS + margin);
    expect(polls.filter((poll) => poll.atMs > faultMs + unreadyAfterMs).every((poll) => poll.status === 503)).toBe(true);
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    expect(settled.length).toBeGreaterThan(0);
    expect(figures(settled).codes, JSON.stringify(figures(settled))).toEqual({ TRY_AGAIN: settled.length });
    // Once the server knows, it does not make a request wait for yet another timeout.
    expect(figures(settled).p50).toBeLessThan(DEADLINE_MS / 4);
  });

  it('frozen existing connections while new ones flow: the server recovers within seconds, without a restart', async ({ annotate }) => {
    const { proxy, client, trial, readyUrl } = await setUp('frozen');
    const ready = pollReady(readyUrl, performance.now());
    const { load, faultMs, margin } = await loadUntilHealthy(client, trial, RATE, 'frozen');
    proxy.freezeExisting();
    // Within two deadlines (and the machine's slowness) every stuck connection has been closed and
    // its transaction ended: what is sent from then on, for two deadlines, must all succeed.
    const recoveredMs = faultMs + 2 * DEADLINE_MS + margin;
    load.endAt(recoveredMs + 2 * DEADLINE_MS);
    const samples = await load.done;
    const polls = await ready.stop();

    const failedAfterFreeze = samples.filter((s) => s.sentMs >= faultMs && s.code !== 'OK');
    const lastFailure = Math.max(faultMs, ...failedAfterFreeze.map((s) => s.sentMs));
    const readyAfter = polls.filter((p) => p.atMs - (load.started - ready.started) > faultMs);
    await annotate(
      `frozen connections, deadline ${DEADLINE_MS} ms: the last failing request was sent ${Math.round(lastFailure - faultMs)} ms after the freeze; ` +
        `after the freeze ${JSON.stringify(figures(sentBetween(samples, faultMs)))}; /ready ${JSON.stringify(
          Object.fromEntries([200, 503].map((status) => [status, readyAfter.filter((p) => p.status === status).length])),
        )}`,
    );
    expect(new Set(samples.map((s) => s.code))).toEqual(new Set(['OK', 'TRY_AGAIN']));
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    const recovered = sentBetween(samples, recoveredMs);
    expect(recovered.length).toBeGreaterThan(0);
    expect(figures(recovered).codes, JSON.stringify(figures(recovered))).toEqual({ OK: recovered.length });
    expect(polls.at(-1)!.status).toBe(200);
    expect(await checkNothingLost(client, trial, samples)).toEqual([]);
  });
});

/** Short enough that the run takes seconds, and a drain longer than the loops' 5 s, as at the defaults. */
const SHUTDOWN_GRACE_MS = 1_000;
const HTTP_DRAIN_TIMEOUT_MS = 8_000;

describe('SIGTERM with a dead path', () => {
  it('the server exits within its documented bound while requests and a background pass hang on a blackholed database', async ({
    annotate,
  }) => {
    const databaseUrl = await createTestDatabaseUrl();
    const target = new URL(databaseUrl);
    const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    const direct = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    // node itself, not tsx (which would pass signals on to a child): the signal reaches the server, and so would SIGKILL.
    const child = spawnRecorded(process.execPath, ['--import', 'tsx', 'src/entry/main.ts'], {
      cwd: PROJECT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...SETTINGS,
        NODE_ENV: 'development',
        LOG_LEVEL: 'info',
        DATABASE_URL: proxy.url(databaseUrl),
        PORT: '0',
        RUN_WORKERS: 'true',
        // The relay polls often, so a pass is in progress when the path dies.
        OUTBOX_POLL_INTERVAL_MS: '20',
        SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
        HTTP_DRAIN_TIMEOUT_MS: String(HTTP_DRAIN_TIMEOUT_MS),
      },
    });
    const output = captureOutput(child);
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      for (const deadline = Date.now() + 60_000; !/GraphQL and GraphiQL: http/.test(output()); await sleep(50)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the server did not start: ${output()}`);
      }
      const base = /(http:\/\/localhost:\d+)\/graphql/.exec(output())![1]!;
      await direct.query("insert into tenants (id, name) values ('sigterm', 'S')");
      const contractId = (
        await direct.query<{ id: string }>("insert into contracts (tenant_id, title) values ('sigterm', 'C') returning id")
      ).rows[0]!.id;
      const client = new LoadClient(`${base}/graphql`, 20);
      const trial: Trial = { graphqlUrl: `${base}/graphql`, sql: direct, tenantId: 'sigterm', contractId };
      expect((await sendDocument(client, trial, 'before')).code).toBe('OK');
      proxy.blackhole();
      // Requests in flight on the dead path when the signal comes.
      const hanging = Array.from({ length: 10 }, (_, i) => sendDocument(client, trial, `hanging-${i}`));
      await sleep(500);
      const signalled = performance.now();
      child.kill('SIGTERM');
      // The grace period and the HTTP drain (the background loops stop meanwhile, 5 s at most), the
      // budget leases given back (STATEMENT_TIMEOUT_MS + 1 s), the pools (2 s): docs/operations.md.
      const bound = SHUTDOWN_GRACE_MS + HTTP_DRAIN_TIMEOUT_MS + Number(SETTINGS.STATEMENT_TIMEOUT_MS) + 1_000 + 2_000;
      const code = await Promise.race([exited, sleep(bound + 5_000, 'still running' as const)]);
      const tookMs = performance.now() - signalled;
      await annotate(`SIGTERM with a blackholed database: exited ${code} after ${Math.round(tookMs)} ms`);
      expect(code).toBe(0);
      expect(tookMs).toBeLessThan(bound);
      await Promise.all(hanging);
      client.close();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await proxy.close();
      await direct.end();
    }
  });
});
