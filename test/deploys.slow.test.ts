import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { LoadResult } from './load/run.js';
import { violationsOf } from './load/scenario.js';
import { couponsScenario } from './load/scenarios/coupons.js';
import { startSteadyLoad } from './load/steady-load.js';
import { createTestDatabaseUrl } from './support/harness.js';
import { spawnRecorded } from './support/processes.js';
import { bannerPort, captureOutput } from './support/scripts.js';

/**
 * Deploys under steady load from the load tool, with real processes: a client that never resends
 * (no Idempotency-Key) must see no error while the HTTP processes are replaced, and a server that
 * stops must fail /ready for its grace period before it stops accepting, then answer every request
 * it accepted.
 */

const PROJECT = new URL('..', import.meta.url).pathname;
/** Requests per second: steady traffic that a busy two-core machine still serves well within its deadlines. */
const RATE = 25;

interface Server {
  databaseUrl: string;
  child: ChildProcess;
  output: () => string;
  base: string;
  exited: Promise<number | null>;
}

/**
 * The server as production runs it: node on the entry point, so that a signal reaches the primary
 * itself. The load's idle keep-alive connections end within seconds (the client closes them 1 s
 * before HTTP_KEEP_ALIVE_TIMEOUT_MS), so that each drain ends in seconds rather than a minute.
 */
async function startServer(env: Record<string, string>): Promise<Server> {
  const databaseUrl = await createTestDatabaseUrl();
  const child = spawnRecorded(process.execPath, ['--import', 'tsx', 'src/entry/main.ts'], {
    cwd: PROJECT,
    env: {
      ...process.env,
      NODE_ENV: 'development',
      LOG_LEVEL: 'info',
      PORT: '0',
      DATABASE_URL: databaseUrl,
      RUN_WORKERS: 'false',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '5000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = captureOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  await until(() => output().includes('GraphQL and GraphiQL:') || child.exitCode !== null, 120_000);
  if (child.exitCode !== null) throw new Error(`server exited: ${output()}`);
  return { databaseUrl, child, output, base: `http://127.0.0.1:${bannerPort(output())}`, exited };
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !condition() && Date.now() < deadline;) await sleep(50);
}

const count = (text: string, pattern: RegExp) => text.match(new RegExp(pattern.source, 'g'))?.length ?? 0;

/** The HTTP processes the primary forked (Linux). */
function httpProcesses(primary: number): number[] {
  return readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Steady coupon load on the open model, sent once each (never resent), until stopped. */
function steadyLoad(base: string) {
  const scenario = couponsScenario(`deploy-${Date.now().toString(36)}`, null);
  // A request nobody answers is lost: it fails the test (NO_ANSWER) instead of holding it up.
  const load = startSteadyLoad({ url: `${base}/graphql`, scenario, rate: RATE, connections: 32, client: { requestTimeoutMs: 30_000 } });
  return {
    ...load,
    /** What a load balancer does once the health check fails: send this server nothing new (what was sent is still answered). */
    takeOutOfRotation: load.stopSending,
    check: (sql: pg.Pool, outcomes: Record<string, number>) => scenario.check(sql, outcomes),
  };
}

/** What /ready answers from the moment a process begins to stop. */
const DRAINING = '503 {"status":"draining"}';

/** A load balancer's health check: GET /ready on a fresh connection every 100 ms, on the load's clock. */
interface Probe {
  /** When it was sent, and when it was answered or failed. */
  atMs: number;
  endMs: number;
  answer: string;
}

function healthCheck(base: string, now: () => number, onProbe: (probes: Probe[]) => void = () => {}) {
  const probes: Probe[] = [];
  let probing = true;
  const done = (async () => {
    while (probing) {
      const atMs = now();
      const answer = await new Promise<string>((resolve) => {
        const req = http.get(`${base}/ready`, { agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          // A failure says why (draining, database unavailable).
          res.on('end', () => resolve(res.statusCode === 200 ? '200' : `${res.statusCode} ${body}`));
        });
        req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      });
      probes.push({ atMs, endMs: now(), answer });
      onProbe(probes);
      await sleep(100);
    }
  })();
  return {
    probes,
    async stop() {
      probing = false;
      await done;
    },
  };
}

/** Outcomes that are not a business answer: error codes and failed connections. */
function failures(result: LoadResult): Record<string, number> {
  const failed: Record<string, number> = {};
  for (const sample of result.samples) {
    if (['ISSUED', 'ALREADY_ISSUED', 'MONTHLY_CAP', 'BUDGET_EXCEEDED'].includes(sample.outcome)) continue;
    const key = sample.networkFailure ?? sample.outcome;
    failed[key] = (failed[key] ?? 0) + 1;
  }
  return failed;
}

/** The coupon invariants, counted in SQL: budgets, caps, one coupon per member, one event per coupon. */
async function invariantsOf(load: ReturnType<typeof steadyLoad>, result: LoadResult, databaseUrl: string) {
  const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  try {
    return violationsOf(await load.check(sql, result.outcomes));
  } finally {
    await sql.end();
  }
}

let running: Server | null = null;
afterEach(async () => {
  if (running && running.child.exitCode === null) {
    running.child.kill('SIGKILL');
    await running.exited;
  }
  running = null;
});

describe('deploys under steady load (real processes, the load tool, no resends)', () => {
  it('a rolling reload of both HTTP processes (SIGHUP), and a SIGTERM to one of them, give the client no error', async () => {
    const server = (running = await startServer({ WEB_CONCURRENCY: '2', SHUTDOWN_GRACE_MS: '1000' }));
    const primary = server.child.pid!;
    const load = steadyLoad(server.base);
    await load.started;
    const check = healthCheck(server.base, load.now);
    await sleep(1_000);
    const before = httpProcesses(primary);
    expect(before).toHaveLength(2);

    server.child.kill('SIGHUP');
    await until(() => server.output().includes('rolling reload done'), 120_000);
    expect(server.output()).toContain('rolling reload done');
    const reloaded = httpProcesses(primary);
    expect(reloaded).toHaveLength(2);
    expect(reloaded.filter((pid) => before.includes(pid))).toEqual([]);

    // An operator's SIGTERM to one HTTP process: its successor starts while it drains.
    process.kill(reloaded[0]!, 'SIGTERM');
    await until(() => count(server.output(), /an HTTP process drained and exited/) === 3, 120_000);
    await until(() => httpProcesses(primary).length === 2, 60_000);
    await sleep(1_000);
    await check.stop();
    const result = await load.stop();

    expect(failures(result)).toEqual({});
    expect(result.requests).toBeGreaterThan(RATE * 5);
    // The server as a whole stayed ready: a health check never saw it fail.
    expect(new Set(check.probes.map((p) => p.answer))).toEqual(new Set(['200']));
    const output = server.output();
    expect(count(output, /"msg":"HTTP process replaced"/)).toBe(2);
    expect(output).toContain('an HTTP process is stopping; starting its successor while it drains');
    // Each exit was expected and clean: logged at info, and nothing at error level.
    expect(count(output, /"level":"info"[^\n]*"msg":"an HTTP process drained and exited"/)).toBe(3);
    expect(output).not.toMatch(/"level":"(error|fatal)"/);
    expect(await invariantsOf(load, result, server.databaseUrl)).toEqual([]);

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  it('a whole restart (SIGTERM) fails /ready for SHUTDOWN_GRACE_MS before it stops accepting, and answers every request it accepted', async () => {
    const graceMs = 3_000;
    const server = (running = await startServer({ WEB_CONCURRENCY: '2', SHUTDOWN_GRACE_MS: String(graceMs) }));
    // The client behind a load balancer: after two failed health checks in a row it sends this
    // server nothing new.
    const load = steadyLoad(server.base);
    await load.started;
    const check = healthCheck(server.base, load.now, (probes) => {
      if (probes.length >= 2 && probes.slice(-2).every((p) => p.answer !== '200')) load.takeOutOfRotation();
    });
    await sleep(1_500);
    const signalledAt = load.now();
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    await sleep(300);
    await check.stop();
    const result = await load.stop();

    const after = check.probes.filter((p) => p.atMs >= signalledAt);
    const refused = after.find((p) => p.answer === 'ECONNREFUSED');
    expect(refused).toBeDefined();
    // From the signal until the listener closed /ready said 503 (after at most the 200s of probes
    // sent before the signal was handled), never 200 again, for at least the grace period.
    const beforeRefusal = after.filter((p) => p.atMs < refused!.atMs);
    const firstFailed = beforeRefusal.findIndex((p) => p.answer === DRAINING);
    expect(firstFailed).toBeGreaterThanOrEqual(0);
    // A probe that connects in the instant the listener closes waits in the accept queue (the
    // kernel's, or the cluster primary's before its hand-off) and is reset when the queue is closed:
    // no HTTP process ever read it. That one probe may say ECONNRESET; any other answer may not.
    const draining = beforeRefusal.slice(firstFailed).map((p) => p.answer);
    if (draining.at(-1) === 'ECONNRESET') draining.pop();
    expect(draining).toEqual(draining.map(() => DRAINING));
    expect(refused!.endMs - signalledAt).toBeGreaterThanOrEqual(graceMs);

    // Every request the server accepted was answered: none reset, none refused, the ones sent after
    // the signal (before the load balancer saw /ready fail) included.
    expect(failures(result)).toEqual({});
    expect(result.samples.filter((s) => s.sentMs > signalledAt).length).toBeGreaterThan(0);
    expect(await invariantsOf(load, result, server.databaseUrl)).toEqual([]);
  });
});
