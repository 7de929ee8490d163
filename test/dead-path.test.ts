import { spawn } from 'node:child_process';
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
import { freePort } from './support/ports.js';
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
const HEALTHY_MS = 2_000;

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
  const reads = Array.from({ length: 3 * Number(backend.config.dbPoolMax) }, () =>
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
 * How late an answer may come past its deadline: the machine's own slowness, measured on the
 * requests answered before the fault, plus a second.
 */
const marginOf = (samples: Sample[]) =>
  1_000 + Math.max(...samples.filter((s) => s.sentMs + s.latencyMs < HEALTHY_MS).map((s) => s.latencyMs));

const sentBetween = (samples: Sample[], fromMs: number, toMs = Infinity) => samples.filter((s) => s.sentMs >= fromMs && s.sentMs < toMs);

describe('a dead network path between the server and PostgreSQL', () => {
  it('a blackhole longer than the deadline, under load: every request answers by its deadline, nothing is lost, and it serves again after', async () => {
    const { proxy, client, trial } = await setUp('blackhole');
    const blackholeMs = 2.5 * DEADLINE_MS;
    const afterMs = 2 * DEADLINE_MS;
    const load = loadAtRate(client, trial, RATE, HEALTHY_MS + blackholeMs + afterMs, 'blackhole');
    await sleep(HEALTHY_MS);
    proxy.blackhole();
    await sleep(blackholeMs);
    proxy.heal();
    const samples = await load.done;

    const healthy = samples.filter((s) => s.sentMs + s.latencyMs < HEALTHY_MS);
    const inFlight = samples.filter((s) => s.sentMs < HEALTHY_MS && s.sentMs + s.latencyMs > HEALTHY_MS);
    const margin = marginOf(samples);
    console.log(
      `blackhole of ${blackholeMs} ms at ${RATE}/s, deadline ${DEADLINE_MS} ms: healthy ${JSON.stringify(figures(healthy))}; ` +
        `in flight when it began ${JSON.stringify(figures(inFlight))}; during ${JSON.stringify(figures(sentBetween(samples, HEALTHY_MS, HEALTHY_MS + blackholeMs)))}; ` +
        `after ${JSON.stringify(figures(sentBetween(samples, HEALTHY_MS + blackholeMs)))}`,
    );
    expect(new Set(samples.map((s) => s.code))).toEqual(new Set(['OK', 'TRY_AGAIN']));
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    for (const s of samples.filter((s) => s.code === 'TRY_AGAIN')) expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(1);
    // Serving again: everything sent a deadline after the path healed succeeded.
    expect(
      figures(sentBetween(samples, HEALTHY_MS + blackholeMs + DEADLINE_MS)).codes,
      JSON.stringify(figures(sentBetween(samples, HEALTHY_MS + blackholeMs + DEADLINE_MS))),
    ).toEqual({
      OK: sentBetween(samples, HEALTHY_MS + blackholeMs + DEADLINE_MS).length,
    });
    expect(await checkNothingLost(client, trial, samples)).toEqual([]);
  });

  it('a blackhole for good: requests answer TRY_AGAIN by their deadline and then at once, and /ready says 503 within seconds', async () => {
    const { proxy, client, trial, readyUrl } = await setUp('blackhole-for-good');
    const deadMs = 4 * DEADLINE_MS;
    const load = loadAtRate(client, trial, RATE / 2, HEALTHY_MS + deadMs, 'for-good');
    const ready = pollReady(readyUrl, load.started);
    await sleep(HEALTHY_MS);
    proxy.blackhole();
    const samples = await load.done;
    const polls = await ready.stop();

    const margin = marginOf(samples);
    const firstUnready = polls.find((poll) => poll.atMs > HEALTHY_MS && poll.status === 503);
    const unreadyAfterMs = firstUnready ? firstUnready.atMs - HEALTHY_MS : Infinity;
    const settled = sentBetween(samples, HEALTHY_MS + 2 * DEADLINE_MS);
    console.log(
      `blackhole for good, deadline ${DEADLINE_MS} ms: /ready 503 after ${Math.round(unreadyAfterMs)} ms; ` +
        `during the first two deadlines ${JSON.stringify(figures(sentBetween(samples, HEALTHY_MS, HEALTHY_MS + 2 * DEADLINE_MS)))}; ` +
        `after ${JSON.stringify(figures(settled))}`,
    );
    // The health check runs every 500 ms and gives its select 1 HEALTH_CHECK_LIMIT_MS.
    expect(unreadyAfterMs).toBeLessThan(500 + HEALTH_CHECK_LIMIT_MS + margin);
    expect(polls.filter((poll) => poll.atMs > HEALTHY_MS + unreadyAfterMs).every((poll) => poll.status === 503)).toBe(true);
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    expect(figures(settled).codes, JSON.stringify(figures(settled))).toEqual({ TRY_AGAIN: settled.length });
    // Once the server knows, it does not make a request wait for yet another timeout.
    expect(figures(settled).p50).toBeLessThan(DEADLINE_MS / 4);
  });

  it('frozen existing connections while new ones flow: the server recovers within seconds, without a restart', async () => {
    const { proxy, client, trial, readyUrl } = await setUp('frozen');
    const frozenMs = 4 * DEADLINE_MS;
    const load = loadAtRate(client, trial, RATE, HEALTHY_MS + frozenMs, 'frozen');
    const ready = pollReady(readyUrl, load.started);
    await sleep(HEALTHY_MS);
    proxy.freezeExisting();
    const samples = await load.done;
    const polls = await ready.stop();

    const margin = marginOf(samples);
    const failedAfterFreeze = samples.filter((s) => s.sentMs >= HEALTHY_MS && s.code !== 'OK');
    const lastFailure = Math.max(HEALTHY_MS, ...failedAfterFreeze.map((s) => s.sentMs));
    console.log(
      `frozen connections, deadline ${DEADLINE_MS} ms: the last failing request was sent ${Math.round(lastFailure - HEALTHY_MS)} ms after the freeze; ` +
        `after the freeze ${JSON.stringify(figures(sentBetween(samples, HEALTHY_MS)))}; /ready ${JSON.stringify(
          Object.fromEntries([200, 503].map((status) => [status, polls.filter((p) => p.atMs > HEALTHY_MS && p.status === status).length])),
        )}`,
    );
    expect(new Set(samples.map((s) => s.code))).toEqual(new Set(['OK', 'TRY_AGAIN']));
    const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
    expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms answered after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
    // Within two deadlines every stuck connection has been closed and its transaction ended.
    const recovered = sentBetween(samples, HEALTHY_MS + 2 * DEADLINE_MS);
    expect(figures(recovered).codes, JSON.stringify(figures(recovered))).toEqual({ OK: recovered.length });
    expect(polls.at(-1)!.status).toBe(200);
    expect(await checkNothingLost(client, trial, samples)).toEqual([]);
  });
});

describe('SIGTERM with a dead path', () => {
  it('the server exits within its documented bound while requests and a background pass hang on a blackholed database', async () => {
    const databaseUrl = await createTestDatabaseUrl();
    const target = new URL(databaseUrl);
    const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    const direct = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    // node itself, not tsx (which would pass signals on to a child): the signal reaches the server, and so would SIGKILL.
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: PROJECT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...SETTINGS,
        NODE_ENV: 'development',
        LOG_LEVEL: 'info',
        DATABASE_URL: proxy.url(databaseUrl),
        PORT: String(await freePort()),
        RUN_WORKERS: 'true',
        // The relay polls often, so a pass is in progress when the path dies.
        OUTBOX_POLL_INTERVAL_MS: '20',
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
      // HTTP drain (10 s at most) + background loops (5 s) + pools (2 s): documented in docs/operations.md.
      const bound = 10_000 + 5_000 + 2_000;
      const code = await Promise.race([exited, sleep(bound + 5_000, 'still running' as const)]);
      const tookMs = performance.now() - signalled;
      console.log(`SIGTERM with a blackholed database: exited ${code} after ${Math.round(tookMs)} ms`);
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
