import { writeFile } from 'node:fs/promises';
import { loadEnvFile } from '../../src/process/env-file.js';
import { ConfigError, loadConfig, type AppConfig } from '../../src/core/config.js';
import { LOAD_USAGE, parseLoadArgs, UsageError, type LoadArgs } from './args.js';
import { LoadClient } from './client.js';
import { describeLoad, renderReport, type MachineLoad, type ReportContext } from './report.js';
import { runLoad, type LoadResult } from './run.js';
import type { LoadScenario } from './scenario.js';
import { couponsScenario, headerSessions } from './scenarios/coupons.js';
import { documentsScenario } from './scenarios/documents.js';
import { huddlesScenario } from './scenarios/huddles.js';
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

const PROGRESS_LOG_INTERVAL_MS = 2_000;
/** A send this much after its scheduled time means the generator, not the server, was the bottleneck. */
const LATE_SEND_MS = 10;

export function buildScenario(args: LoadArgs, runId: string): LoadScenario {
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
  }
}

/** How the requests were sent, in words. */
export function describeModel(result: Pick<LoadResult, 'model' | 'offeredRate' | 'concurrency'>): string {
  return result.model === 'open'
    ? `open model: ${result.offeredRate} requests/s on a fixed schedule, at most ${result.concurrency} connections`
    : `closed model: ${result.concurrency} requests in flight`;
}

/** How far behind its own schedule the load generator sent, when it did: then the offered rate was not offered. */
function sendLag(result: LoadResult): string {
  const lags = result.samples.map((s) => s.sentMs - s.dueMs);
  const late = lags.filter((lag) => lag > LATE_SEND_MS).length;
  const worst = Math.max(0, ...lags);
  return late === 0
    ? `every request sent on time (at most ${worst.toFixed(1)} ms late)`
    : `${late} requests sent more than ${LATE_SEND_MS} ms late (at most ${worst.toFixed(0)} ms): the load generator fell behind`;
}

/** How the run met the machine and the server: printed with the figures, so that two runs can be told apart. */
export interface RunCircumstances {
  server: Record<string, string>;
  load: MachineLoad;
}

export function formatResult(result: LoadResult, circumstances?: RunCircumstances): string {
  const { latency } = result;
  const { server, load } = circumstances ?? {};
  const lines = [
    `scenario ${result.scenario}, ${describeModel(result)}`,
    ...Object.entries(server ?? {}).map(([key, value], i) => `${i === 0 ? 'server' : ''}`.padEnd(14) + `${key}: ${value}`),
    ...(load ? [`machine load  ${describeLoad(load)}`] : []),
    `requests      ${result.requests} in ${(result.wallMs / 1000).toFixed(2)} s`,
    ...(result.offeredRate !== null
      ? [
          `offered       ${result.offeredRate.toFixed(1)} requests/s`,
          `achieved      ${result.requestsPerSecond.toFixed(1)} requests/s (answers over the whole run)`,
          `schedule      ${sendLag(result)}`,
        ]
      : [`throughput    ${result.requestsPerSecond.toFixed(1)} requests/s`]),
    `latency       p50 ${latency.p50.toFixed(1)} ms  p95 ${latency.p95.toFixed(1)} ms  p99 ${latency.p99.toFixed(1)} ms  max ${latency.max.toFixed(1)} ms`,
    `outcomes      ${Object.entries(result.outcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
    `errors        ${
      Object.entries(result.errors)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }${
      Object.keys(result.networkFailures).length
        ? ` (network: ${Object.entries(result.networkFailures)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }`,
    result.violations === null
      ? 'invariants    not checked: pass --database-url with --url'
      : result.violations.length === 0
        ? 'invariants    all held (checked in SQL)'
        : `invariants    VIOLATED:\n${result.violations.map((v) => `  - ${v}`).join('\n')}`,
    ...(result.checks ?? []).map((check) => `  ${check.violations.length ? 'VIOLATED' : 'held'}  ${check.invariant}: ${check.counted}`),
  ];
  return lines.join('\n');
}

function reportContext(args: LoadArgs, url: string, circumstances: RunCircumstances): ReportContext {
  return {
    date: new Date(),
    commit: currentCommit(),
    machine: machineDescription(),
    ...circumstances,
    configuration: {
      scenario: args.scenario,
      model: describeModel({ model: args.rate === null ? 'closed' : 'open', offeredRate: args.rate, concurrency: args.concurrency }),
      amount: args.durationSeconds !== null ? `${args.durationSeconds} s` : `${args.requests} requests`,
      target: args.url ? url : `${url} (a server started on a fresh embedded PostgreSQL)`,
    },
  };
}

async function main(): Promise<number> {
  let args: LoadArgs;
  try {
    args = parseLoadArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n\n${LOAD_USAGE}`);
      return 2;
    }
    throw error;
  }
  if (args.help) {
    console.log(LOAD_USAGE);
    return 0;
  }
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
  try {
    console.error(`loading ${url} (${args.url ? 'given' : 'started on a fresh embedded database'})`);
    const runId = `${Date.now().toString(36)}`;
    let lastProgressLine = 0;
    const result = await runLoad({
      client,
      sessions: headerSessions(args.secret ? { 'x-action-secret': args.secret } : {}),
      scenario: buildScenario(args, runId),
      concurrency: args.concurrency,
      rate: args.rate,
      amount: args.durationSeconds !== null ? { durationSeconds: args.durationSeconds } : { requests: args.requests ?? Infinity },
      sql,
      onProgress: (done, elapsedMs) => {
        const line = `  ${done} requests, ${(elapsedMs / 1000).toFixed(1)} s, ${((done / Math.max(1, elapsedMs)) * 1000).toFixed(0)}/s`;
        // A terminal gets one line rewritten in place; a log gets a line every few seconds.
        if (process.stderr.isTTY) process.stderr.write(`\r${line}   `);
        else if (elapsedMs - lastProgressLine >= PROGRESS_LOG_INTERVAL_MS) {
          lastProgressLine = elapsedMs;
          process.stderr.write(`${line}\n`);
        }
      },
    });
    if (process.stderr.isTTY) process.stderr.write('\n');
    const circumstances: RunCircumstances = {
      server: ownServer
        ? describeOwnServer(ownServer, 'a fresh embedded PostgreSQL on this machine, default durability')
        : describeGivenServer(url),
      load: { cores: loadBefore.cores, before: loadBefore.averages, after: machineLoadNow().averages },
    };
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
    return result.violations !== null && result.violations.length > 0 ? 1 : 0;
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
