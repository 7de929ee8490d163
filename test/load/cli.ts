import { writeFile } from 'node:fs/promises';
import { loadEnvFile } from '../../src/process/env-file.js';
import { ConfigError, loadConfig, type AppConfig } from '../../src/core/config.js';
import { LOAD_USAGE, parseLoadArgs, UsageError, type LoadArgs } from './args.js';
import { LoadClient } from './client.js';
import { liveLine, type LiveFigures } from './live.js';
import {
  describeBytes,
  describeLatency,
  describeLoad,
  describeThresholdValue,
  renderReport,
  type MachineLoad,
  type ReportContext,
} from './report.js';
import { runLoad, type LoadResult, type PartSummary } from './run.js';
import type { LoadScenario } from './scenario.js';
import { checkoutScenario, DEFAULT_CARDS } from './scenarios/checkout.js';
import { couponsScenario, headerSessions } from './scenarios/coupons.js';
import { documentsScenario } from './scenarios/documents.js';
import { huddlesScenario } from './scenarios/huddles.js';
import { OperationError, operationScenario, readOperation, type OperationSpec } from './scenarios/operation.js';
import { stagedRate, type PlacedStage } from './schedule.js';
import {
  currentCommit,
  describeGivenServer,
  describeOwnServer,
  machineDescription,
  machineLoadNow,
  serverProcessEnv,
  sqlPool,
  startScratchDatabase,
  startServerProcess,
} from './target.js';

/** Without a terminal (a CI log), one progress line this often; a terminal gets its line rewritten every 250 ms. */
const PROGRESS_LOG_INTERVAL_MS = 2_000;
/** A send this much after its scheduled time means the generator, not the server, was the bottleneck. */
const LATE_SEND_MS = 10;
/** Exit code of a run that crossed a threshold (k6's): 1 stays an invariant violated, 2 bad arguments. */
export const THRESHOLD_CROSSED = 99;

export function buildScenario(args: LoadArgs, runId: string, operation: OperationSpec | null = null): LoadScenario {
  const total = args.requests;
  switch (args.scenario) {
    case 'coupons':
      return couponsScenario(runId, total);
    case 'documents':
      return documentsScenario(runId, 3, total);
    case 'huddles':
      // At least 80 members, so that at full speed (2,000 requests/s on two cores) none writes faster
      // than 25 a second: under MEMBER_WRITE_RATE.
      return huddlesScenario(runId, 20, Math.max(4, Math.ceil(args.concurrency / 10)), total);
    case 'checkout':
      // Only the simulated provider has a page the tool can answer as a customer: against Stripe
      // (STRIPE_API_URL), no card asks for 3-D Secure.
      return checkoutScenario(runId, total, process.env['STRIPE_API_URL'] ? { cards: { ...DEFAULT_CARDS, threeDSecure: 0 } } : {});
    case 'operation':
      return operationScenario(runId, total, operation!);
  }
}

/** How the requests were sent, in words. */
export function describeModel(
  result: Pick<LoadResult, 'model' | 'offeredRate' | 'concurrency'> & { stages?: PlacedStage[] | null },
): string {
  if (result.stages) {
    const ramps = result.stages.map((stage) => `${((stage.endMs - stage.startMs) / 1000).toFixed(0)} s to ${stage.toRate}/s`).join(', ');
    return `open model in stages from ${result.stages[0]!.fromRate}/s: ${ramps}; at most ${result.concurrency} connections`;
  }
  return result.model === 'open'
    ? `open model: ${result.offeredRate} requests/s on a fixed schedule, at most ${result.concurrency} connections`
    : `closed model: ${result.concurrency} requests in flight`;
}

/** How far behind its own schedule the load generator sent, when it did: then the offered rate was not offered. */
function sendLag(result: LoadResult): string {
  const lags = result.samples.map((s) => s.sentMs - s.dueMs);
  const late = lags.filter((lag) => lag > LATE_SEND_MS).length;
  const worst = Math.max(0, ...lags);
  const unsent = result.notSent > 0 ? `; ${result.notSent} due before the end were never sent` : '';
  return late === 0 && unsent === ''
    ? `every request sent on time (at most ${worst.toFixed(1)} ms late)`
    : `${late} requests sent more than ${LATE_SEND_MS} ms late (at most ${worst.toFixed(0)} ms)${unsent}: the load generator fell behind`;
}

/** How the run met the machine and the server: printed with the figures, so that two runs can be told apart. */
export interface RunCircumstances {
  server: Record<string, string>;
  load: MachineLoad;
}

const listed = (record: Record<string, number>) =>
  Object.entries(record)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/** The errors of a part, with how the connections failed. */
function errorsLine(part: PartSummary): string {
  const network = Object.keys(part.networkFailures).length ? ` (network: ${listed(part.networkFailures)})` : '';
  return `${listed(part.errors) || 'none'}${network}`;
}

function invariantLines(result: LoadResult): string[] {
  const verdict = result.scenario.startsWith('operation')
    ? 'invariants    none known for an arbitrary operation: its answers are counted by code above'
    : result.violations === null
      ? 'invariants    not checked: pass --database-url with --url'
      : result.checks?.length === 0
        ? 'invariants    none known for this scenario'
        : result.violations.length === 0
          ? 'invariants    all held (checked in SQL)'
          : `invariants    VIOLATED:\n${result.violations.map((v) => `  - ${v}`).join('\n')}`;
  return [
    verdict,
    ...(result.checks ?? []).map((check) => `  ${check.violations.length ? 'VIOLATED' : 'held'}  ${check.invariant}: ${check.counted}`),
  ];
}

function thresholdLines(result: LoadResult): string[] {
  if (result.thresholds.length === 0) return [];
  return [
    ...(result.aborted
      ? [`aborted       ${(result.aborted.atMs / 1000).toFixed(1)} s into the run: ${result.aborted.threshold} could no longer be met`]
      : []),
    ...result.thresholds.map(
      (verdict, i) =>
        `${i === 0 ? 'thresholds' : ''}`.padEnd(14) +
        `${verdict.passed ? 'pass' : 'FAIL'}  ${verdict.expression}: ${describeThresholdValue(verdict)}`,
    ),
  ];
}

function rateLines(result: LoadResult): string[] {
  if (result.model === 'closed') return [`throughput    ${result.requestsPerSecond.toFixed(1)} requests/s`];
  return [
    ...(result.offeredRate !== null ? [`offered       ${result.offeredRate.toFixed(1)} requests/s`] : []),
    `achieved      ${result.requestsPerSecond.toFixed(1)} requests/s (answers over the measured part)`,
    `schedule      ${sendLag(result)}`,
  ];
}

export function formatResult(result: LoadResult, circumstances?: RunCircumstances): string {
  const { server, load } = circumstances ?? {};
  const lines = [
    `scenario ${result.scenario}, ${describeModel(result)}`,
    ...Object.entries(server ?? {}).map(([key, value], i) => `${i === 0 ? 'server' : ''}`.padEnd(14) + `${key}: ${value}`),
    ...(load ? [`machine load  ${describeLoad(load)}`] : []),
    ...(result.warmup
      ? [
          `warm-up       ${result.warmup.requests} requests in the first ${(result.warmupMs / 1000).toFixed(1)} s, left out below: ${describeLatency(result.warmup.latency)}; errors ${errorsLine(result.warmup)}`,
        ]
      : []),
    `requests      ${result.requests} in ${(result.wallMs / 1000).toFixed(2)} s${result.timedOut ? `, ${result.timedOut} unanswered at the end (TIMED_OUT)` : ''}`,
    ...rateLines(result),
    `latency       ${describeLatency(result.latency)}`,
    `received      ${describeBytes(result.bytesReceived)} of response bodies`,
    `outcomes      ${listed(result.outcomes)}`,
    `errors        ${errorsLine(result)}`,
    ...thresholdLines(result),
    ...invariantLines(result),
  ];
  return lines.join('\n');
}

/** 0 when everything held, 1 on an invariant violated (whatever the thresholds), 99 on a threshold crossed. */
export function exitCodeOf(result: LoadResult): number {
  if (result.violations !== null && result.violations.length > 0) return 1;
  if (result.aborted !== null || result.thresholds.some((verdict) => !verdict.passed)) return THRESHOLD_CROSSED;
  return 0;
}

/** Progress on stderr: a line rewritten in place every 250 ms on a terminal, a line every 2 s in a log. */
function progressPrinter(): { live: (figures: LiveFigures) => void; done: () => void } {
  let lastLine = -Infinity;
  return {
    live(figures) {
      const line = liveLine(figures);
      if (process.stderr.isTTY) process.stderr.write(`\r${line}\x1b[K`);
      else if (figures.elapsedMs - lastLine >= PROGRESS_LOG_INTERVAL_MS) {
        lastLine = figures.elapsedMs;
        process.stderr.write(`${line}\n`);
      }
    },
    done() {
      if (process.stderr.isTTY) process.stderr.write('\n');
    },
  };
}

function reportContext(args: LoadArgs, url: string, circumstances: RunCircumstances): ReportContext {
  return {
    date: new Date(),
    commit: currentCommit(),
    machine: machineDescription(),
    ...circumstances,
    configuration: {
      scenario: args.scenario,
      model: describeModel({
        model: args.rate === null && args.stages === null ? 'closed' : 'open',
        offeredRate: args.rate,
        concurrency: args.concurrency,
        stages: args.stages ? stagedRate(args.stages, args.rate ?? 0).stages : null,
      }),
      amount: args.durationSeconds !== null ? `${args.durationSeconds} s measured` : `${args.requests} measured requests`,
      ...(args.warmupSeconds > 0 ? { 'warm-up': `${args.warmupSeconds} s, left out of the figures` } : {}),
      ...(args.thresholds.length > 0
        ? { thresholds: `${args.thresholds.map((t) => t.expression).join(', ')}${args.abortOnFail ? ' (--abort-on-fail)' : ''}` }
        : {}),
      target: args.url ? url : `${url} (a server started on a fresh embedded PostgreSQL)`,
    },
  };
}

/** The arguments, and the operation of --scenario operation read and validated; a number is the exit code. */
function readArguments(argv: string[]): { args: LoadArgs; operation: OperationSpec | null } | number {
  try {
    const args = parseLoadArgs(argv);
    if (args.help) {
      console.log(LOAD_USAGE);
      return 0;
    }
    const operation = args.scenario === 'operation' ? readOperation(args.document!, args.variables, args.tenant) : null;
    return { args, operation };
  } catch (error) {
    if (error instanceof UsageError) {
      // The usage first: the refusal is the last line a terminal shows.
      console.error(`${LOAD_USAGE}\n\n${error.message}`);
      return 2;
    }
    if (error instanceof OperationError) {
      console.error(error.message);
      return 2;
    }
    throw error;
  }
}

/** The run's schedule and amount from the arguments: what runLoad is told besides the scenario. */
function loadShape(args: LoadArgs) {
  return {
    concurrency: args.concurrency,
    rate: args.rate,
    schedule: args.stages ? stagedRate(args.stages, args.rate ?? 0) : null,
    warmupMs: args.warmupSeconds * 1000,
    amount: args.durationSeconds !== null ? { durationSeconds: args.durationSeconds } : { requests: args.requests ?? Infinity },
    thresholds: args.thresholds,
    abortOnFail: args.abortOnFail,
  };
}

/** Prints the figures, writes the JSON and the report. */
async function publish(args: LoadArgs, url: string, result: LoadResult, circumstances: RunCircumstances): Promise<void> {
  console.log(formatResult(result, circumstances));
  if (args.json) {
    const { samples: _samples, ...summary } = result;
    await writeFile(args.json, `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`summary written to ${args.json}`);
  }
  if (args.report) {
    await writeFile(args.report, renderReport(result, reportContext(args, url, circumstances)));
    console.log(`report written to ${args.report}`);
  }
}

async function main(): Promise<number> {
  const read = readArguments(process.argv.slice(2));
  if (typeof read === 'number') return read;
  const { args, operation } = read;
  let ownServer: AppConfig | null = null;
  try {
    // The .env file as npm start reads it, and the configuration the server will start with:
    // a wrong value stops here, and the report states the settings.
    loadEnvFile();
    if (args.url === null) ownServer = loadConfig(serverProcessEnv({ DATABASE_URL: 'postgres://scratch@127.0.0.1/postgres' }, 0));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`Configuration error: ${error.message}`);
    return 2;
  }
  const loadBefore = machineLoadNow();
  const database = args.url === null ? await startScratchDatabase() : null;
  const server = database ? await startServerProcess('src/entry/main.ts', { DATABASE_URL: database.databaseUrl }) : null;
  const url = args.url ?? server!.url;
  const databaseUrl = args.databaseUrl ?? database?.databaseUrl ?? null;
  const sql = databaseUrl ? sqlPool(databaseUrl) : null;
  // An idle connection the server drops must not take the whole run down with it.
  sql?.on('error', (error) => console.error(`database connection lost: ${error.message}`));
  const client = new LoadClient(url, args.concurrency, { resend: args.resend });
  const progress = progressPrinter();
  try {
    console.error(`loading ${url} (${args.url ? 'given' : 'started on a fresh embedded database'})`);
    const result = await runLoad({
      client,
      sessions: headerSessions(args.secret ? { 'x-action-secret': args.secret } : {}),
      scenario: buildScenario(args, `${Date.now().toString(36)}`, operation),
      ...loadShape(args),
      sql,
      onLive: progress.live,
    });
    progress.done();
    const circumstances: RunCircumstances = {
      server: ownServer
        ? describeOwnServer(ownServer, 'a fresh embedded PostgreSQL on this machine, default durability')
        : describeGivenServer(url),
      load: { cores: loadBefore.cores, before: loadBefore.averages, after: machineLoadNow().averages },
    };
    await publish(args, url, result, circumstances);
    return exitCodeOf(result);
  } finally {
    client.close();
    await sql?.end();
    await server?.stop();
    await database?.stop();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\/test\/load\//, '/test/load/'))) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
