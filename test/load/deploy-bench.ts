import { readFileSync } from 'node:fs';
import http from 'node:http';
import { writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { LoadClient } from './client.js';
import { runLoad, type LoadResult } from './run.js';
import { violationsOf, type LoadScenario } from './scenario.js';
import { couponsScenario, headerSessions } from './scenarios/coupons.js';
import { currentCommit, machineDescription, startScratchDatabase, startServerProcess } from './target.js';

/**
 * What a deploy does to clients: the coupon load at a steady rate (open model, no resends, the
 * way a client without an Idempotency-Key sends), and in the middle of it one of
 *
 *   kill-workers  SIGTERM to each HTTP process of WEB_CONCURRENCY in turn, `--interval` seconds apart
 *   reload        SIGHUP to the primary: the rolling reload
 *   restart       SIGTERM to the primary: the whole server stops, as one instance of a fleet does
 *
 * It prints every answer that was not an answer (by how the connection failed) and when /ready
 * answered what, polled on fresh connections as a load balancer's health check does.
 *
 *   npm run bench:deploy -- --action reload --rate 60
 *   npm run bench:deploy -- --action restart --rate 60 --web-concurrency 1 --env SHUTDOWN_GRACE_MS=5000
 */

const ACTIONS = ['kill-workers', 'reload', 'restart'] as const;
/** A request unanswered this long has been lost, not delayed: a deadline is at most 25 s. */
const NO_ANSWER_MS = 30_000;
type Action = (typeof ACTIONS)[number];

interface Args {
  action: Action;
  rate: number;
  webConcurrency: number;
  intervalSeconds: number;
  warmUpSeconds: number;
  tailSeconds: number;
  env: Record<string, string>;
  json: string | null;
  /** Send nothing new once /ready failed twice in a row, as a load balancer's health check does. */
  lb: boolean;
  /** Run dist/entry/main.js (npm run build first), as production does, instead of src/entry/main.ts through tsx. */
  compiled: boolean;
}

const USAGE = `usage: npm run bench:deploy -- --action kill-workers|reload|restart [options]

  --rate R              coupon requests per second (default 60), each sent on schedule, never resent
  --web-concurrency N   HTTP processes (default 2)
  --interval S          kill-workers: seconds between two kills (default 15)
  --warm-up S           seconds of load before the action (default 5)
  --tail S              seconds of load after the action ended (default 5)
  --env KEY=VALUE       extra environment for the server (repeatable)
  --json FILE           write the figures as JSON
  --lb                  behave as a load balancer in front would: send nothing new once /ready
                        (polled every 100 ms) failed twice in a row
  --compiled            run the compiled server (dist/entry/main.js: npm run build first)

A request that gets no answer for 30 s counts as failed (NO_ANSWER).`;

function parseArgs(argv: string[]): Args {
  const args: Args = {
    action: 'reload',
    rate: 60,
    webConcurrency: 2,
    intervalSeconds: 15,
    warmUpSeconds: 5,
    tailSeconds: 5,
    env: {},
    json: null,
    lb: false,
    compiled: false,
  };
  let actionGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${flag} needs a value\n\n${USAGE}`);
      return next;
    };
    const number = () => {
      const raw = value();
      if (!/^\d+$/.test(raw)) throw new Error(`${flag} needs a whole number, got ${raw}`);
      return Number(raw);
    };
    if (flag === '--action') {
      const action = value();
      if (!(ACTIONS as readonly string[]).includes(action)) throw new Error(`unknown action ${action}\n\n${USAGE}`);
      args.action = action as Action;
      actionGiven = true;
    } else if (flag === '--rate') args.rate = number();
    else if (flag === '--web-concurrency') args.webConcurrency = number();
    else if (flag === '--interval') args.intervalSeconds = number();
    else if (flag === '--warm-up') args.warmUpSeconds = number();
    else if (flag === '--tail') args.tailSeconds = number();
    else if (flag === '--env') {
      const [key, ...rest] = value().split('=');
      args.env[key!] = rest.join('=');
    } else if (flag === '--json') args.json = value();
    else if (flag === '--lb') args.lb = true;
    else if (flag === '--compiled') args.compiled = true;
    else throw new Error(`unknown option ${flag}\n\n${USAGE}`);
  }
  if (!actionGiven) throw new Error(`--action is required\n\n${USAGE}`);
  return args;
}

/** The processes a process forked (Linux): the HTTP processes of the primary. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !condition(); await sleep(50)) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
  }
}

interface ReadyProbe {
  atMs: number;
  answer: string;
}

/** GET /ready on a fresh connection every `everyMs`, as a load balancer's health check does. */
function pollReadiness(base: string, since: () => number, onUnready: () => void, everyMs = 100) {
  const probes: ReadyProbe[] = [];
  let stopped = false;
  const probe = () =>
    new Promise<string>((resolve) => {
      const req = http.get(`${base}/ready`, { agent: false, timeout: 2_000 }, (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.statusCode)));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
  const done = (async () => {
    while (!stopped) {
      const atMs = since();
      probes.push({ atMs, answer: await probe() });
      if (probes.length >= 2 && probes.slice(-2).every((p) => p.answer !== '200')) onUnready();
      await sleep(everyMs);
    }
  })();
  return {
    probes,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

/** Consecutive probes with the same answer, as [from, to, answer]. */
function phases(probes: ReadyProbe[]): { fromMs: number; toMs: number; answer: string; probes: number }[] {
  const out: { fromMs: number; toMs: number; answer: string; probes: number }[] = [];
  for (const probe of probes) {
    const last = out.at(-1);
    if (last && last.answer === probe.answer) {
      last.toMs = probe.atMs;
      last.probes++;
    } else out.push({ fromMs: probe.atMs, toMs: probe.atMs, answer: probe.answer, probes: 1 });
  }
  return out;
}

/** The load until `stop()`: the endless coupon stream, cut off when asked. */
function stoppable(scenario: LoadScenario): { scenario: LoadScenario; stop(): void } {
  let stopped = false;
  return {
    scenario: { ...scenario, request: (index, client, sessions) => (stopped ? null : scenario.request(index, client, sessions)) },
    stop: () => (stopped = true),
  };
}

async function act(args: Args, primary: number, exited: Promise<void>, log: (line: string) => void): Promise<void> {
  if (args.action === 'restart') {
    process.kill(primary, 'SIGTERM');
    log('SIGTERM sent to the primary');
    await exited;
    log('the server exited');
    return;
  }
  const before = childrenOf(primary);
  const replaced = () => {
    const now = childrenOf(primary);
    return now.length === args.webConcurrency && before.every((pid) => !now.includes(pid));
  };
  if (args.action === 'reload') {
    process.kill(primary, 'SIGHUP');
    log(`SIGHUP sent to the primary (HTTP processes ${before.join(', ')})`);
  } else {
    for (const [i, pid] of before.entries()) {
      if (i > 0) await sleep(args.intervalSeconds * 1000);
      process.kill(pid, 'SIGTERM');
      log(`SIGTERM sent to HTTP process ${pid}`);
    }
  }
  await waitFor('every HTTP process replaced', replaced, 600_000);
  log(`every HTTP process replaced: now ${childrenOf(primary).join(', ')}`);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const database = await startScratchDatabase();
  const server = await startServerProcess(args.compiled ? 'dist/entry/main.js' : 'src/entry/main.ts', {
    DATABASE_URL: database.databaseUrl,
    WEB_CONCURRENCY: String(args.webConcurrency),
    RUN_WORKERS: 'false',
    LOG_LEVEL: 'info',
    ...args.env,
  });
  const base = new URL(server.url).origin;
  const exited = new Promise<void>((resolve) => {
    if (server.child.exitCode !== null) resolve();
    else server.child.once('exit', () => resolve());
  });
  if (args.webConcurrency > 1)
    await waitFor('HTTP processes forked', () => childrenOf(server.child.pid!).length === args.webConcurrency, 60_000);
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  sql.on('error', () => {});
  const client = new LoadClient(server.url, 256, { requestTimeoutMs: NO_ANSWER_MS });
  const load = stoppable(couponsScenario(`deploy-${Date.now().toString(36)}`, null));
  // runLoad's clock (every sample's times) starts once its set-up is done and its sockets are open.
  let origin = 0;
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const events: { atMs: number; what: string }[] = [];
  const log = (what: string) => {
    const atMs = performance.now() - origin;
    events.push({ atMs, what });
    console.error(`  ${(atMs / 1000).toFixed(2)} s  ${what}`);
  };
  let readiness: ReturnType<typeof pollReadiness> | null = null;
  let result: LoadResult;
  let actionStartMs = 0;
  try {
    const running = runLoad({
      client,
      sessions: headerSessions(),
      scenario: load.scenario,
      concurrency: 256,
      rate: args.rate,
      amount: { durationSeconds: 3_600 },
      sql: null,
      onProgress: (_done, elapsedMs) => {
        if (origin === 0) {
          origin = performance.now() - elapsedMs;
          markStarted();
        }
      },
    });
    await started;
    readiness = pollReadiness(
      base,
      () => performance.now() - origin,
      () => {
        if (args.lb) load.stop();
      },
    );
    await sleep(args.warmUpSeconds * 1000);
    actionStartMs = performance.now() - origin;
    await act(args, server.child.pid!, exited, log);
    await sleep(args.tailSeconds * 1000);
    load.stop();
    result = await running;
  } finally {
    await readiness?.stop();
    client.close();
    await server.stop().catch(() => {});
  }
  const violations = violationsOf(await load.scenario.check(sql, result.outcomes));
  await sql.end();
  await database.stop();

  const failures = result.samples
    .filter((s) => s.outcome === 'NETWORK_ERROR' || s.outcome === 'TRY_AGAIN' || s.outcome.startsWith('HTTP_'))
    .map((s) => ({ outcome: s.networkFailure ?? s.outcome, sentMs: Math.round(s.sentMs), endMs: Math.round(s.endMs) }));
  const figures = {
    date: new Date().toISOString(),
    commit: currentCommit(),
    machine: machineDescription(),
    action: args.action,
    lb: args.lb,
    compiled: args.compiled,
    rate: args.rate,
    webConcurrency: args.webConcurrency,
    env: args.env,
    requests: result.requests,
    outcomes: result.outcomes,
    networkFailures: result.networkFailures,
    latency: result.latency,
    failures,
    violations,
    events,
    actionStartMs,
    readiness: phases(readiness?.probes ?? []),
  };
  console.log(
    `deploy bench: ${args.action}, ${args.rate} requests/s, WEB_CONCURRENCY=${args.webConcurrency}, ${JSON.stringify(args.env)}${args.lb ? ', client behind a load balancer (--lb)' : ''}${args.compiled ? ', compiled' : ''}`,
  );
  console.log(`commit ${figures.commit}, ${figures.machine}`);
  console.log(`requests   ${result.requests}`);
  console.log(`outcomes   ${JSON.stringify(result.outcomes)}`);
  console.log(`network    ${JSON.stringify(result.networkFailures)}`);
  console.log(
    `latency    p50 ${result.latency.p50.toFixed(1)} ms, p99 ${result.latency.p99.toFixed(1)} ms, max ${result.latency.max.toFixed(1)} ms`,
  );
  for (const failure of failures.slice(0, 20)) {
    console.log(
      `  failed: ${failure.outcome}, sent at ${(failure.sentMs / 1000).toFixed(2)} s, ended at ${(failure.endMs / 1000).toFixed(2)} s`,
    );
  }
  if (failures.length > 20) console.log(`  ... and ${failures.length - 20} more`);
  console.log(`invariants ${violations.length === 0 ? 'all held' : violations.join('; ')}`);
  console.log('events (seconds after the load began):');
  for (const event of events) console.log(`  ${(event.atMs / 1000).toFixed(2)}  ${event.what}`);
  console.log('/ready (fresh connection every 100 ms):');
  for (const phase of figures.readiness) {
    console.log(`  ${(phase.fromMs / 1000).toFixed(2)}-${(phase.toMs / 1000).toFixed(2)} s  ${phase.answer} (${phase.probes} probes)`);
  }
  if (args.json) await writeFile(args.json, `${JSON.stringify(figures, null, 2)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
