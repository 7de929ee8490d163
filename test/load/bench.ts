import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { issueCouponForSession } from '../../src/coupons/graphql.js';
import { insertCampaign } from '../../src/coupons/service.js';
import { createDatabase } from '../../src/db/database.js';
import { runInTransaction } from '../../src/db/transaction.js';
import type { Context } from '../../src/graphql/context.js';
import { createLogger } from '../../src/logger.js';
import { buildServices } from '../../src/server.js';
import { LoadClient, runReleasedTogether } from './client.js';
import { runLoad } from './run.js';
import {
  checkCouponInvariants,
  couponLoad,
  couponRequests,
  headerSessions,
  hotCampaignScenario,
  referenceScenario,
  type CouponScenario,
} from './scenarios/coupons.js';
import { countBy, summarize } from './stats.js';
import { scrapeCounter, startScratchDatabase, startServerProcess, type ServerProcess } from './target.js';

interface Row {
  strategy: string;
  clients: number;
  requestsPerSecond: number;
  p99: number;
  violations: number;
  retries: number;
  tryAgain: number;
}

const USAGE = `usage: npm run bench [-- --concurrency 8,32,128] [--json FILE]

Runs the coupon reference scenario (1,800 requests) against each strategy on one embedded
PostgreSQL, through the real HTTP endpoint, then the same SQL straight through pg, then one hot
campaign with 1 and with 16 budget slots. Prints one table and checks the targets.`;

/** The rows of the table: a server strategy, and the budget slots its campaigns get. */
const STRATEGIES = [
  { label: 'naive read-check-write', server: 'naive', slots: 1 },
  { label: 'SERIALIZABLE + retries', server: 'serializable', slots: 1 },
  { label: 'advisory locks', server: 'advisory', slots: 1 },
  { label: 'conditional updates (ours)', server: 'conditional', slots: 1 },
  { label: 'conditional + 16 budget slots', server: 'conditional', slots: 16 },
] as const;

const HOT_CLIENTS = 128;
const WARM_UP_MEMBERS = 150;
const HOT_MEMBERS = 4_000;

function parseArgs(argv: string[]) {
  let concurrency = [8, 32, 128];
  let json: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--concurrency') concurrency = (argv[++i] ?? '').split(',').map(Number);
    else if (argv[i] === '--json') json = argv[++i] ?? null;
    else if (argv[i] === '--help') {
      console.log(USAGE);
      process.exit(0);
    } else {
      console.error(`unknown option ${argv[i]}\n\n${USAGE}`);
      process.exit(2);
    }
  }
  if (concurrency.some((c) => !Number.isInteger(c) || c < 1)) {
    console.error(`--concurrency takes whole numbers separated by commas\n\n${USAGE}`);
    process.exit(2);
  }
  return { concurrency, json };
}

async function throughEndpoint(server: ServerProcess, sql: pg.Pool, label: string, scenario: CouponScenario, clients: number): Promise<Row> {
  const client = new LoadClient(server.url, clients);
  const total = scenario.members.length * scenario.campaigns.length * scenario.sends;
  const retriesBefore = await scrapeCounter(server.metricsUrl, 'transaction_retries_total');
  try {
    const result = await runLoad({
      client,
      sessions: headerSessions(),
      scenario: couponLoad(scenario, total),
      concurrency: clients,
      amount: { requests: total },
      sql,
    });
    return {
      strategy: label,
      clients,
      requestsPerSecond: result.requestsPerSecond,
      p99: result.latency.p99,
      violations: result.violations?.length ?? 0,
      retries: (await scrapeCounter(server.metricsUrl, 'transaction_retries_total')) - retriesBefore,
      tryAgain: result.outcomes['TRY_AGAIN'] ?? 0,
    };
  } finally {
    client.close();
  }
}

/**
 * The raw ceiling: the same unit of work (issueCouponForSession: the same statements, runner,
 * idempotency and audit code) called straight through pg, without HTTP or GraphQL, at the same
 * concurrency and pool size.
 */
async function throughPg(databaseUrl: string, sql: pg.Pool, scenario: CouponScenario, clients: number): Promise<Row> {
  const config = loadConfig({ DATABASE_URL: databaseUrl, NODE_ENV: 'production', ACTION_SECRET: 'bench-only-secret-0123456789' });
  const log = createLogger('silent');
  const database = createDatabase({ connectionString: databaseUrl, max: config.dbPoolMax, acquireTimeoutMs: config.dbPoolAcquireTimeoutMs, applicationName: 'bench-raw', preparedStatements: config.dbPreparedStatements }, log);
  const services = buildServices(config, database, log);
  try {
    await sql.query('insert into tenants (id, name, monthly_cap_yen) values ($1, $1, $2)', [scenario.tenantId, scenario.capYen]);
    for (const campaign of scenario.campaigns) {
      await runInTransaction(database.db, services.transactions, { deadline: Date.now() + 10_000 }, (trx) =>
        insertCampaign(trx, scenario.tenantId, { ...campaign, name: campaign.id }),
      );
    }
    const retries = services.metrics.transactionRetries;
    const retriesBefore = (await retries.get()).values.reduce((sum, v) => sum + v.value, 0);
    const contextFor = (memberId: string): Context => ({
      services,
      db: database.db,
      session: { role: 'user', tenantId: scenario.tenantId, userId: memberId },
      requestId: randomUUID(),
      deadline: Date.now() + config.requestDeadlineMs,
      log,
      idempotencyKeyHeader: null,
      idempotency: null,
    });
    const started = performance.now();
    const outcomes = await runReleasedTogether(
      couponRequests(scenario, 1).map((request) => async () => {
        const begun = performance.now();
        try {
          const result = await issueCouponForSession(contextFor(request.memberId), request.campaignId);
          return { outcome: result.status, latencyMs: performance.now() - begun };
        } catch (error) {
          return { outcome: String((error as { extensions?: { code?: string } }).extensions?.code ?? 'ERROR'), latencyMs: performance.now() - begun };
        }
      }),
      clients,
    );
    const wallMs = performance.now() - started;
    const counts = countBy(outcomes, (o) => o.outcome);
    const invariants = await checkCouponInvariants(sql, scenario, counts['ISSUED'] ?? 0);
    return {
      strategy: 'same SQL straight through pg',
      clients,
      requestsPerSecond: (outcomes.length / wallMs) * 1000,
      p99: summarize(outcomes.map((o) => o.latencyMs)).p99,
      violations: invariants.violations.length,
      retries: (await retries.get()).values.reduce((sum, v) => sum + v.value, 0) - retriesBefore,
      tryAgain: counts['TRY_AGAIN'] ?? 0,
    };
  } finally {
    await database.close();
  }
}

function table(rows: Row[]): string {
  const lines = [
    '| strategy | clients | req/s | p99 ms | violations | retries | TRY_AGAIN |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.strategy} | ${r.clients} | ${r.requestsPerSecond.toFixed(0)} | ${r.p99.toFixed(1)} | ${r.violations} | ${r.retries} | ${r.tryAgain} |`,
    ),
  ];
  return lines.join('\n');
}

function find(rows: Row[], strategy: string, clients: number): Row | undefined {
  return rows.find((r) => r.strategy === strategy && r.clients === clients);
}

function targets(rows: Row[], hot: Row[]): string[] {
  const ours = 'conditional updates (ours)';
  const verdict = (ok: boolean | undefined, text: string) => `${ok === undefined ? 'n/a ' : ok ? 'MET ' : 'MISS'} ${text}`;
  const lines: string[] = [];
  const oursRows = rows.filter((r) => r.strategy.startsWith('conditional'));
  lines.push(verdict(oursRows.every((r) => r.violations === 0), 'zero invariant violations for our strategies at every concurrency'));
  lines.push(verdict(rows.some((r) => r.strategy.startsWith('naive') && r.violations > 0), 'the naive strategy shows violations in the same run'));
  const endpoint32 = find(rows, ours, 32);
  const raw32 = find(rows, 'same SQL straight through pg', 32);
  if (endpoint32 && raw32) {
    const ratio = endpoint32.requestsPerSecond / raw32.requestsPerSecond;
    lines.push(verdict(ratio >= 0.8, `endpoint at 32 clients is ${ratio.toFixed(2)} of the raw pg ceiling (target 0.80)`));
  }
  for (const clients of [32, 128]) {
    const mine = find(rows, ours, clients);
    for (const peer of ['SERIALIZABLE + retries', 'advisory locks']) {
      const other = find(rows, peer, clients);
      if (mine && other) {
        lines.push(
          verdict(
            mine.requestsPerSecond > other.requestsPerSecond && mine.p99 < other.p99,
            `ours beats ${peer} at ${clients} clients: ${mine.requestsPerSecond.toFixed(0)} vs ${other.requestsPerSecond.toFixed(0)} req/s, p99 ${mine.p99.toFixed(0)} vs ${other.p99.toFixed(0)} ms`,
          ),
        );
      }
    }
  }
  const [single, slotted] = hot;
  if (single && slotted) {
    const ratio = slotted.requestsPerSecond / single.requestsPerSecond;
    lines.push(verdict(ratio >= 2 && slotted.violations === 0, `hot campaign at ${HOT_CLIENTS} clients: 16 slots give ${ratio.toFixed(2)}x one row, ${slotted.violations} violations (target 2x, 0)`));
  }
  if (endpoint32) {
    lines.push(verdict(endpoint32.p99 < 100, `p99 at 32 clients ${endpoint32.p99.toFixed(1)} ms (target below 100)`));
    lines.push(verdict(endpoint32.tryAgain === 0, `TRY_AGAIN at 32 clients: ${endpoint32.tryAgain} (target 0)`));
  }
  return lines;
}

async function main() {
  const { concurrency, json } = parseArgs(process.argv.slice(2));
  const machine = `${os.cpus().length} x ${os.cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  console.log(`bench on ${machine}`);
  const database = await startScratchDatabase();
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  // An idle connection the server drops must not take the whole run down with it.
  sql.on('error', (error) => console.error(`database connection lost: ${error.message}`));
  const rows: Row[] = [];
  const hot: Row[] = [];
  let run = 0;
  const runId = () => `b${(run++).toString(36)}${Date.now().toString(36)}`;
  try {
    for (const serverName of [...new Set(STRATEGIES.map((s) => s.server))]) {
      const server = await startServerProcess('test/load/bench-server.ts', { DATABASE_URL: database.databaseUrl, BENCH_STRATEGY: serverName, RUN_WORKERS: 'false' });
      try {
        // A fresh process compiles and optimizes its code on the first requests: keep that out of the figures.
        await throughEndpoint(server, sql, 'warm-up', referenceScenario(runId(), WARM_UP_MEMBERS), 32);
        for (const strategy of STRATEGIES.filter((s) => s.server === serverName)) {
          for (const clients of concurrency) {
            const scenario = referenceScenario(runId());
            for (const campaign of scenario.campaigns) campaign.budgetSlots = strategy.slots;
            const row = await throughEndpoint(server, sql, strategy.label, scenario, clients);
            rows.push(row);
            console.log(`  ${row.strategy} at ${clients}: ${row.requestsPerSecond.toFixed(0)} req/s, p99 ${row.p99.toFixed(1)} ms, ${row.violations} violations`);
          }
        }
        if (serverName === 'conditional') {
          for (const slots of [1, 16]) {
            const scenario = hotCampaignScenario(runId(), HOT_MEMBERS, slots);
            const row = await throughEndpoint(server, sql, `hot campaign, ${slots} budget slot${slots > 1 ? 's' : ''}`, scenario, HOT_CLIENTS);
            hot.push(row);
            console.log(`  ${row.strategy} at ${HOT_CLIENTS}: ${row.requestsPerSecond.toFixed(0)} req/s, p99 ${row.p99.toFixed(1)} ms, ${row.violations} violations`);
          }
        }
      } finally {
        await server.stop();
      }
    }
    await throughPg(database.databaseUrl, sql, referenceScenario(runId(), WARM_UP_MEMBERS), 32);
    for (const clients of concurrency) {
      const row = await throughPg(database.databaseUrl, sql, referenceScenario(runId()), clients);
      rows.push(row);
      console.log(`  ${row.strategy} at ${clients}: ${row.requestsPerSecond.toFixed(0)} req/s, p99 ${row.p99.toFixed(1)} ms`);
    }
  } finally {
    await sql.end();
    await database.stop();
  }
  console.log(`\nCoupon reference scenario (1,800 requests), ${machine}:\n`);
  console.log(table([...rows, ...hot]));
  console.log('\nTargets:');
  for (const line of targets(rows, hot)) console.log(`  ${line}`);
  if (json) await writeFile(json, `${JSON.stringify({ machine, rows, hot }, null, 2)}\n`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
