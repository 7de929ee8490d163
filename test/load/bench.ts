import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { issueCouponForSession } from '../../src/graphql/types/coupons.js';
import { insertCampaign } from '../../src/coupons/service.js';
import { createDatabase } from '../../src/db/database.js';
import { runInTransaction } from '../../src/db/transaction.js';
import type { AccessContexts } from '../../src/graphql/guards.js';
import { createTurns } from '../../src/graphql/read.js';
import { createLogger } from '../../src/logger.js';
import { buildServices } from '../../src/services.js';
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
  type SendOptions,
} from './scenarios/coupons.js';
import { countBy, summarize } from './stats.js';
import {
  currentCommit,
  machineDescription,
  scrapeCounter,
  startDelayProxyProcess,
  startScratchDatabase,
  startServerProcess,
  type ServerProcess,
} from './target.js';

/** What one run of one row measured. */
interface Figures {
  requestsPerSecond: number;
  p99: number;
  violations: number;
  retries: number;
  tryAgain: number;
}

interface Row {
  label: string;
  clients: number;
  run: (runId: string) => Promise<Figures>;
  runs: Figures[];
}

const LABEL = {
  naive: 'naive read-check-write',
  serializable: 'SERIALIZABLE + retries',
  advisory: 'advisory locks',
  ours: 'conditional updates (ours)',
  oursSlotted: 'conditional + 16 budget slots',
  raw: 'same SQL straight through pg',
  keyed: 'ours with Idempotency-Key',
  actions: 'ours via /actions',
  traced: 'ours with tracing on (every request sampled and exported)',
  hotOneSlot: 'hot campaign, 1 budget slot, 1 ms round trip',
  hotSixteenSlots: 'hot campaign, 16 budget slots, 1 ms round trip',
} as const;

/** The peers run the same HTTP server with another coupon strategy (test/load/strategies.ts). */
const PEERS = [
  { label: LABEL.naive, server: 'naive' },
  { label: LABEL.serializable, server: 'serializable' },
  { label: LABEL.advisory, server: 'advisory' },
] as const;

const DEFAULT_REPEATS = 3;
/** 600 members send 3 campaigns twice: 3,600 requests per run, twice the reference scenario. */
const DEFAULT_MEMBERS = 600;
const WARM_UP_MEMBERS = 150;
const HOT_CLIENTS = 128;
const HOT_MEMBERS = 4_000;
const HOT_SLOTS = 16;
/** Half the round trip to a database in a neighbouring zone of the same region. */
const ONE_WAY_DELAY_MS = 0.5;
const FEATURE_CLIENTS = 32;
/**
 * The servers run as in production (NODE_ENV=production: GraphQL's and Yoga's development checks
 * off), so the load sends Hasura's shared secret with the x-hasura-* headers.
 */
const ACTION_SECRET = 'bench-only-action-secret-0123456789';
const SESSIONS = headerSessions({ 'x-action-secret': ACTION_SECRET });

const USAGE = `usage: npm run bench [-- --concurrency 8,32,128] [--repeat 3] [--members 600] [--json FILE]

Runs the coupon reference scenario (scaled to --members: 6 requests each) against each strategy
through the real HTTP endpoint, keyed and through /actions, and the same unit of work straight
through pg; then one hot campaign (4,000 members, 128 clients) with 1 and with 16 budget slots
behind a TCP proxy that adds ${ONE_WAY_DELAY_MS} ms each way. Every row runs --repeat times, all
rows interleaved, and the table shows the medians. Prints one table and checks the targets.`;

function parseArgs(argv: string[]) {
  let concurrency = [8, 32, 128];
  let repeats = DEFAULT_REPEATS;
  let members = DEFAULT_MEMBERS;
  let json: string | null = null;
  const whole = (raw: string | undefined) => (raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : NaN);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--concurrency') concurrency = (argv[++i] ?? '').split(',').map(Number);
    else if (argv[i] === '--repeat') repeats = whole(argv[++i]);
    else if (argv[i] === '--members') members = whole(argv[++i]);
    else if (argv[i] === '--json') json = argv[++i] ?? null;
    else if (argv[i] === '--help') {
      console.log(USAGE);
      process.exit(0);
    } else {
      console.error(`unknown option ${argv[i]}\n\n${USAGE}`);
      process.exit(2);
    }
  }
  if (concurrency.some((c) => !Number.isInteger(c) || c < 1) || !(repeats >= 1) || !(members >= 3)) {
    console.error(
      `--concurrency takes whole numbers separated by commas, --repeat a whole number, --members a whole number from 3\n\n${USAGE}`,
    );
    process.exit(2);
  }
  return { concurrency, repeats, members, json };
}

/** One run of `scenario` through a server's HTTP endpoint, its invariants counted in SQL afterwards. */
async function throughEndpoint(
  server: ServerProcess,
  sql: pg.Pool,
  scenario: CouponScenario,
  clients: number,
  send: SendOptions = {},
): Promise<Figures> {
  const client = new LoadClient(server.url, clients);
  const total = scenario.members.length * scenario.campaigns.length * scenario.sends;
  const retriesBefore = await scrapeCounter(server.metricsUrl, 'transaction_retries_total');
  try {
    const result = await runLoad({
      client,
      sessions: SESSIONS,
      scenario: couponLoad(scenario, total, send),
      concurrency: clients,
      amount: { requests: total },
      sql,
    });
    return {
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
 * The raw ceiling: the same unit of work (issueCouponForSession: the same prepared statements,
 * runner, idempotency and audit code, the same pool size) called in this process straight through
 * pg, without HTTP or GraphQL, with the same number of requests in flight.
 */
function rawTarget(databaseUrl: string, sql: pg.Pool) {
  const config = loadConfig({ DATABASE_URL: databaseUrl, NODE_ENV: 'production', ACTION_SECRET });
  const log = createLogger('silent');
  const database = createDatabase(
    {
      connectionString: databaseUrl,
      max: config.dbPoolMax,
      acquireTimeoutMs: config.dbPoolAcquireTimeoutMs,
      applicationName: 'bench-raw',
      preparedStatements: config.dbPreparedStatements,
    },
    log,
  );
  const services = buildServices(config, database, log);
  const retryCount = async () => (await services.metrics.transactionRetries.get()).values.reduce((sum, v) => sum + v.value, 0);
  const contextFor = (tenantId: string, memberId: string): AccessContexts['member'] => ({
    services,
    pool: database.db,
    session: { role: 'user', tenantId, userId: memberId },
    requestId: randomUUID(),
    deadline: Date.now() + config.requestDeadlineMs,
    signal: new AbortController().signal,
    turns: createTurns(),
    log,
    idempotencyKeyHeader: null,
    idempotency: null,
  });

  async function run(scenario: CouponScenario, clients: number): Promise<Figures> {
    await sql.query('insert into tenants (id, name, monthly_cap_yen) values ($1, $1, $2)', [scenario.tenantId, scenario.capYen]);
    for (const campaign of scenario.campaigns) {
      await runInTransaction(database.db, services.transactions, { deadline: Date.now() + 10_000 }, (trx) =>
        insertCampaign(trx, scenario.tenantId, { ...campaign, name: campaign.id }),
      );
    }
    const retriesBefore = await retryCount();
    const started = performance.now();
    const outcomes = await runReleasedTogether(
      couponRequests(scenario, 1).map((request) => async () => {
        const begun = performance.now();
        try {
          const result = await issueCouponForSession(contextFor(scenario.tenantId, request.memberId), { campaignId: request.campaignId });
          return { outcome: result.status, latencyMs: performance.now() - begun };
        } catch (error) {
          return {
            outcome: String((error as { extensions?: { code?: string } }).extensions?.code ?? 'ERROR'),
            latencyMs: performance.now() - begun,
          };
        }
      }),
      clients,
    );
    const wallMs = performance.now() - started;
    const counts = countBy(outcomes, (o) => o.outcome);
    const invariants = await checkCouponInvariants(sql, scenario, counts['ISSUED'] ?? 0);
    return {
      requestsPerSecond: (outcomes.length / wallMs) * 1000,
      p99: summarize(outcomes.map((o) => o.latencyMs)).p99,
      violations: invariants.violations.length,
      retries: (await retryCount()) - retriesBefore,
      tryAgain: counts['TRY_AGAIN'] ?? 0,
    };
  }
  return { run, close: () => database.close() };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

function table(rows: Row[]): string {
  const lines = [
    '| strategy | clients | req/s | req/s range | p99 ms | violations | retries | TRY_AGAIN |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((row) => {
      const rates = row.runs.map((r) => r.requestsPerSecond);
      return (
        `| ${row.label} | ${row.clients} | ${median(rates).toFixed(0)} | ${Math.min(...rates).toFixed(0)}-${Math.max(...rates).toFixed(0)} | ` +
        `${median(row.runs.map((r) => r.p99)).toFixed(1)} | ${Math.max(...row.runs.map((r) => r.violations))} | ` +
        `${median(row.runs.map((r) => r.retries)).toFixed(0)} | ${Math.max(...row.runs.map((r) => r.tryAgain))} |`
      );
    }),
  ];
  return lines.join('\n');
}

/** The median over repetitions of one row's req/s divided by another's in the same repetition. */
function pairedRatio(row: Row, base: Row): number {
  return median(row.runs.map((run, i) => run.requestsPerSecond / base.runs[i]!.requestsPerSecond));
}

/** A collector that takes every OTLP export and keeps nothing: the traced row pays for exporting, not for a real backend. */
async function startSpanSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function targets(rows: Row[]): string[] {
  const find = (label: string, clients: number) => rows.find((r) => r.label === label && r.clients === clients);
  const verdict = (ok: boolean, text: string) => `${ok ? 'MET ' : 'MISS'} ${text}`;
  const lines: string[] = [];
  const correct = rows.filter((r) => r.label !== LABEL.naive);
  lines.push(
    verdict(
      correct.every((r) => r.runs.every((run) => run.violations === 0)),
      'zero invariant violations for every correct strategy in every run',
    ),
  );
  lines.push(
    verdict(
      rows.some((r) => r.label === LABEL.naive && r.runs.some((run) => run.violations > 0)),
      'the naive strategy shows violations in the same run',
    ),
  );
  const ours32 = find(LABEL.ours, 32);
  const pairs: [string, string, number][] = [
    [LABEL.raw, 'endpoint at 32 clients against the raw pg row', 0.75],
    [LABEL.keyed, `${LABEL.keyed} against ${LABEL.ours}`, 0.9],
    [LABEL.actions, `${LABEL.actions} against ${LABEL.ours}`, 0.9],
  ];
  const traced = find(LABEL.traced, 32);
  if (ours32 && traced) {
    lines.push(
      `INFO tracing on (every span exported) against off: ${pairedRatio(traced, ours32).toFixed(2)} of the req/s, median of the interleaved pairs`,
    );
  }
  for (const [label, text, target] of pairs) {
    const other = find(label, 32);
    if (!ours32 || !other) continue;
    const ratio = label === LABEL.raw ? pairedRatio(ours32, other) : pairedRatio(other, ours32);
    lines.push(verdict(ratio >= target, `${text}: ${ratio.toFixed(2)} (target ${target}, median of the interleaved pairs)`));
  }
  if (ours32) {
    const p99 = median(ours32.runs.map((r) => r.p99));
    lines.push(verdict(p99 < 100, `p99 at 32 clients ${p99.toFixed(1)} ms (target below 100)`));
  }
  for (const clients of [32, 128]) {
    const mine = find(LABEL.ours, clients);
    for (const peer of [LABEL.serializable, LABEL.advisory]) {
      const other = find(peer, clients);
      if (!mine || !other) continue;
      const [myRate, theirRate] = [mine, other].map((r) => median(r.runs.map((run) => run.requestsPerSecond)));
      const [myP99, theirP99] = [mine, other].map((r) => median(r.runs.map((run) => run.p99)));
      lines.push(
        verdict(
          myRate! > theirRate! && myP99! < theirP99!,
          `ours ahead of ${peer} at ${clients} clients: ${myRate!.toFixed(0)} vs ${theirRate!.toFixed(0)} req/s, p99 ${myP99!.toFixed(0)} vs ${theirP99!.toFixed(0)} ms`,
        ),
      );
    }
  }
  const [one, sixteen] = [find(LABEL.hotOneSlot, HOT_CLIENTS), find(LABEL.hotSixteenSlots, HOT_CLIENTS)];
  if (one && sixteen) {
    const ratio = pairedRatio(sixteen, one);
    const violations = Math.max(...sixteen.runs.map((r) => r.violations));
    lines.push(
      verdict(
        ratio >= 2 && violations === 0,
        `hot campaign, whole run incl. sold out: 16 slots give ${ratio.toFixed(2)}x one slot, ${violations} violations (target 2x, 0)`,
      ),
    );
  }
  return lines;
}

async function main() {
  const { concurrency, repeats, members, json } = parseArgs(process.argv.slice(2));
  const machine = machineDescription();
  const commit = currentCommit();
  console.log(`bench on ${machine}, commit ${commit}`);
  const database = await startScratchDatabase();
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  // An idle connection the server drops must not take the whole run down with it.
  sql.on('error', (error) => console.error(`database connection lost: ${error.message}`));
  const proxy = await startDelayProxyProcess(database.databaseUrl, ONE_WAY_DELAY_MS);
  const collector = await startSpanSink();
  const serverEnv = (databaseUrl: string, strategy: string) => ({
    DATABASE_URL: databaseUrl,
    BENCH_STRATEGY: strategy,
    RUN_WORKERS: 'false',
    NODE_ENV: 'production',
    ACTION_SECRET,
  });
  const servers = new Map<string, ServerProcess>();
  const raw = rawTarget(database.databaseUrl, sql);
  let run = 0;
  const runId = () => `b${(run++).toString(36)}${Date.now().toString(36)}`;
  const reference = (id: string, slots = 1) => {
    const scenario = referenceScenario(id, members);
    for (const campaign of scenario.campaigns) campaign.budgetSlots = slots;
    return scenario;
  };
  try {
    for (const strategy of ['conditional', ...PEERS.map((p) => p.server)]) {
      servers.set(strategy, await startServerProcess('test/load/bench-server.ts', serverEnv(database.databaseUrl, strategy)));
    }
    const distant = await startServerProcess('test/load/bench-server.ts', serverEnv(proxy.databaseUrl, 'conditional'));
    // Tracing costs nothing when it is off (every other row); this row shows what it costs when on.
    servers.set(
      'traced',
      await startServerProcess('test/load/bench-server.ts', {
        ...serverEnv(database.databaseUrl, 'conditional'),
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.url,
        OTEL_TRACES_SAMPLER: 'always_on',
      }),
    );
    servers.set('distant', distant);
    const ours = servers.get('conditional')!;

    // A fresh process compiles and optimizes its code on its first requests: keep that out of the figures.
    for (const server of servers.values()) await throughEndpoint(server, sql, referenceScenario(runId(), WARM_UP_MEMBERS), 32);
    await throughEndpoint(ours, sql, referenceScenario(runId(), WARM_UP_MEMBERS), 32, { idempotencyKeys: true, viaActions: true });
    await raw.run(referenceScenario(runId(), WARM_UP_MEMBERS), 32);

    const rows: Row[] = [];
    const row = (label: string, clients: number, measure: Row['run']) => rows.push({ label, clients, run: measure, runs: [] });
    for (const clients of concurrency) {
      // Each comparison's rows sit next to each other, so every pair is measured under the same load of the machine.
      row(LABEL.ours, clients, (id) => throughEndpoint(ours, sql, reference(id), clients));
      if (clients === FEATURE_CLIENTS) {
        row(LABEL.keyed, clients, (id) => throughEndpoint(ours, sql, reference(id), clients, { idempotencyKeys: true }));
        row(LABEL.actions, clients, (id) => throughEndpoint(ours, sql, reference(id), clients, { viaActions: true }));
        row(LABEL.traced, clients, (id) => throughEndpoint(servers.get('traced')!, sql, reference(id), clients));
      }
      row(LABEL.raw, clients, (id) => raw.run(reference(id), clients));
      for (const peer of PEERS) row(peer.label, clients, (id) => throughEndpoint(servers.get(peer.server)!, sql, reference(id), clients));
      row(LABEL.oursSlotted, clients, (id) => throughEndpoint(ours, sql, reference(id, HOT_SLOTS), clients));
    }
    row(LABEL.hotOneSlot, HOT_CLIENTS, (id) => throughEndpoint(distant, sql, hotCampaignScenario(id, HOT_MEMBERS, 1), HOT_CLIENTS));
    row(LABEL.hotSixteenSlots, HOT_CLIENTS, (id) =>
      throughEndpoint(distant, sql, hotCampaignScenario(id, HOT_MEMBERS, HOT_SLOTS), HOT_CLIENTS),
    );

    for (let repeat = 1; repeat <= repeats; repeat++) {
      // Every other pass runs backwards, so that a drift of the machine's load favours no row.
      for (const measured of repeat % 2 === 1 ? rows : [...rows].reverse()) {
        const figures = await measured.run(runId());
        measured.runs.push(figures);
        console.log(
          `  [${repeat}/${repeats}] ${measured.label} at ${measured.clients}: ${figures.requestsPerSecond.toFixed(0)} req/s, ` +
            `p99 ${figures.p99.toFixed(1)} ms, ${figures.violations} violations`,
        );
      }
    }
    const requestsPerRun = members * 6;
    console.log(
      `\nCoupon reference scenario, ${requestsPerRun.toLocaleString('en')} requests per run (${members} members x 3 campaigns x 2 sends); ` +
        `hot campaign ${HOT_MEMBERS.toLocaleString('en')} requests per run at ${HOT_CLIENTS} clients through a ${ONE_WAY_DELAY_MS} ms-each-way proxy.\n` +
        `Every row ran ${repeats} times, all rows interleaved (every other pass in reverse order); req/s and p99 are medians, ` +
        `violations and TRY_AGAIN the worst run. ${machine}, commit ${commit}:\n`,
    );
    console.log(table(rows));
    console.log('\nTargets:');
    for (const line of targets(rows)) console.log(`  ${line}`);
    if (json)
      await writeFile(
        json,
        `${JSON.stringify({ machine, commit, repeats, requestsPerRun, rows: rows.map(({ run: _run, ...r }) => r) }, null, 2)}\n`,
      );
  } finally {
    for (const server of servers.values()) await server.stop();
    await raw.close();
    await proxy.stop();
    await collector.close();
    await sql.end();
    await database.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
