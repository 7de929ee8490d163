import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/core/config.js';
import { issueCouponForSession } from '../../src/graphql/types/coupons.js';
import { fingerprint } from '../../src/features/idempotency/service.js';
import { createDatabase } from '../../src/db/database.js';
import type { AccessContexts } from '../../src/graphql/guards.js';
import { databaseRunners } from '../../src/graphql/context.js';
import { createDatabaseQueue } from '../../src/graphql/read.js';
import { createLogger } from '../../src/core/logger.js';
import { buildServices } from '../../src/services/services.js';
import { openDatabase } from '../../src/process/open-database.js';
import { LoadClient, runReleasedTogether } from './client.js';
import { runLoad } from './run.js';
import {
  campaignStandings,
  checkCouponInvariants,
  couponLoad,
  couponRequests,
  headerSessions,
  hotCampaignScenario,
  insertCouponScenario,
  ISSUE_COUPON_QUERY,
  keptAnswerViolations,
  referenceScenario,
  strandedYen,
  type CouponScenario,
  type SendOptions,
} from './scenarios/coupons.js';
import { measureCpu, postgresPids } from './cpu.js';
import { startLockSampler } from './lock-sampler.js';
import { DEFAULT_CALIBRATION, type Calibration } from './sim/calibration.js';
import { countBy, summarize } from './stats.js';
import {
  BENCH_ACTION_SECRET,
  benchServerEnv,
  currentCommit,
  machineDescription,
  scrapeCounter,
  startDelayProxyProcess,
  startScratchDatabase,
  startServerProcess,
  startSpanSink,
  type ServerProcess,
} from './target.js';
import { UNGATED_TURN } from '../../src/services/operation-turn.js';
import { SALE, saleOpens, saleTable, type SaleFigures } from './sale-opens.js';
import { ProcessGroups } from './process-groups.js';

/** What one run of one row measured. */
interface Figures {
  requestsPerSecond: number;
  p99: number;
  violations: number;
  retries: number;
  tryAgain: number;
  /** Yen issued beyond the budgets (must be 0). */
  overspendYen: number;
  /** Hot rows: the yen that could still pay for coupons when the first BUDGET_EXCEEDED was answered, and at the end (0 when sold out); null elsewhere. */
  strandedAtFirstRefusalYen: number | null;
  strandedAtEndYen: number | null;
  /** Mean time a budget row (slot or lease) was held per coupon issued, sampled in PostgreSQL (lock-sampler.ts); null where not sampled. */
  lockHoldMs: number | null;
  /** CPU milliseconds per request by part (server, PostgreSQL, delay proxy, load generator), and the machine's busy cores. */
  cpuMsPerRequest: Record<string, number>;
  machineBusyCores: number;
  /** Batched rows: the share of the requests that batches carried, and the mean issues a batch (the server's counters); null where nothing was batched. */
  batching: Batching | null;
  /** The machine's 1-minute load average as the run ended: what else ran beside it. */
  loadAverage: number;
}

interface Batching {
  share: number;
  membersPerBatch: number;
}

interface Row {
  label: string;
  clients: number;
  run: (runId: string) => Promise<Figures>;
  runs: Figures[];
}

/** One column of the table: its header, and the cell of a row from the row's runs. */
interface Column {
  header: string;
  cell(row: Row): string;
}

const LABEL = {
  naive: 'naive read-check-write',
  serializable: 'SERIALIZABLE + retries',
  advisory: 'advisory locks',
  ours: 'conditional updates (ours)',
  oursSlotted: 'conditional + 16 budget slots',
  raw: 'same SQL straight through pg',
  rawKeyed: 'same SQL straight through pg with Idempotency-Key',
  bare: 'same unit behind bare node:http',
  bareBatched: 'same unit behind bare node:http, batched',
  bareGraphQL: 'same unit executed by graphql-jit behind bare node:http',
  keyed: 'ours with Idempotency-Key',
  actions: 'ours via /actions',
  traced: 'ours with tracing on (every request sampled and exported)',
  hotOneSlot: 'hot campaign, 1 budget slot, 1 ms round trip',
  hotSixteenSlots: 'hot campaign, 16 budget slots, 1 ms round trip',
  hotSixteenSlotsNaive: 'hot campaign, 16 budget slots split by yen (naive twin), 1 ms round trip',
  hotLeases: 'hot campaign, budget leases, 1 ms round trip',
  hotSerializable: 'hot campaign, SERIALIZABLE, 1 ms round trip',
  notHot: 'not hot: reference campaigns, 1 ms round trip',
  oursBatched: 'conditional updates (ours), batched',
  hotOneSlotBatched: 'hot campaign, 1 budget slot, batched, 1 ms round trip',
  notHotBatched: 'not hot: reference campaigns, batched, 1 ms round trip',
  saleOpens: `sale opens: ${SALE.members.toLocaleString('en')} members at startsAt, ${SALE.slots} budget slots, 1 ms round trip`,
  saleOpensBatched: `sale opens: ${SALE.members.toLocaleString('en')} members at startsAt, ${SALE.slots} budget slots, batched, 1 ms round trip`,
} as const;

/** What the baseline's rows are called: the same label, measured on the other checkout (`--baseline`). */
const BEFORE = ' (before)';

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
/** A request of a row (or a warm-up) whose server stays silent this long fails (NO_ANSWER) instead of holding the bench for ever: far above any server's request deadline. */
const NO_ANSWER_MS = 60_000;
const HOT_CLIENTS = 128;
const HOT_MEMBERS = 4_000;
const HOT_SLOTS = 16;
/** Coupons a server process leases at a time on the hot campaign with leases (1/40 of its budget). */
const HOT_LEASE_COUPONS = 50;
/** Half the round trip to a database in a neighbouring zone of the same region. */
const ONE_WAY_DELAY_MS = 0.5;
const FEATURE_CLIENTS = 32;
/**
 * Clients at which batching must cost nothing: too few requests in flight for batches to pay, so
 * the batched row must read as the unbatched one (p99 within QUIET_P99_MS, req/s at least QUIET_RATE).
 */
const QUIET_CLIENTS = [1, 8];
const QUIET_P99_MS = 2;
const QUIET_RATE = 0.95;
/** From this many clients on, batches form: the batched rows must halve PostgreSQL's CPU per request. */
const BATCHING_CLIENTS = FEATURE_CLIENTS;

/** Every server and proxy of the run: only the group of the row being measured runs (process-groups.ts). */
const groups = new ProcessGroups();

/** Each batched row and the unbatched row it is measured beside (at the same clients). */
const BATCHED_PAIRS = [
  [LABEL.oursBatched, LABEL.ours],
  [LABEL.hotOneSlotBatched, LABEL.hotOneSlot],
  [LABEL.notHotBatched, LABEL.notHot],
] as const;

/** The most issues a batched row's server runs as one statement (COUPON_ISSUE_BATCH_MAX). */
const BATCH_MAX = '32';
/** The servers run as in production (benchServerEnv), so the load sends Hasura's shared secret with the x-hasura-* headers. */
const SESSIONS = headerSessions({ 'x-action-secret': BENCH_ACTION_SECRET });

const USAGE = `usage: npm run bench [-- --concurrency 1,8,32,128] [--repeat 3] [--members 600] [--json FILE] [--baseline DIR] [--calibration FILE] [--only TEXT ...]

Runs the coupon reference scenario (scaled to --members: 6 requests each) against each strategy
through the real HTTP endpoint, keyed and through /actions, the same unit of work behind a bare
node:http server and straight through pg (at 32 clients keyed too); then one hot campaign (4,000 members, 128 clients) with 1 and with 16 budget slots,
with budget leases and at SERIALIZABLE, and the reference campaigns under the same load, behind a
TCP proxy that adds ${ONE_WAY_DELAY_MS} ms each way. Rows marked batched run a server with issue batching on
(COUPON_ISSUE_BATCH_MAX=${BATCH_MAX}); every other row issues one statement per request. At 1 client only
ours, batched and not, run: nothing contends there, and batching must cost nothing. Every row runs
--repeat times, all rows interleaved, and the table shows the medians and each row's load average.
Only the servers of the row being measured run: every other is stopped (SIGSTOP) meanwhile.
Prints one table and checks the targets.

--baseline DIR   also runs the servers of another checkout (its own npm ci done) on a database of
                 their own, as rows marked "${BEFORE.trim()}", interleaved with the rest (a checkout
                 older than COUPON_ISSUE_BATCH_MAX runs its batched row unbatched)
--calibration F  where to write what \`npm run sim\` is calibrated with (default ${DEFAULT_CALIBRATION})
--only TEXT      only the rows whose strategy contains TEXT (may be given again: any of them); the
                 calibration is then not written. A quick comparison while working:
                 --concurrency 32 --repeat 3 --members 150 --only "(ours)" --only bare`;

function parseArgs(argv: string[]) {
  let concurrency = [1, 8, 32, 128];
  let repeats = DEFAULT_REPEATS;
  let members = DEFAULT_MEMBERS;
  let json: string | null = null;
  let baseline: string | null = null;
  let calibration = DEFAULT_CALIBRATION;
  const only: string[] = [];
  const whole = (raw: string | undefined) => (raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : NaN);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--concurrency') concurrency = (argv[++i] ?? '').split(',').map(Number);
    else if (argv[i] === '--repeat') repeats = whole(argv[++i]);
    else if (argv[i] === '--members') members = whole(argv[++i]);
    else if (argv[i] === '--json') json = argv[++i] ?? null;
    else if (argv[i] === '--baseline') baseline = argv[++i] ?? null;
    else if (argv[i] === '--calibration') calibration = argv[++i] ?? calibration;
    else if (argv[i] === '--only') only.push(argv[++i] ?? '');
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
  return { concurrency, repeats, members, json, baseline, calibration, only };
}

/** Where a server runs: its process, the database it uses (for its CPU), and the proxy in between, if any. */
interface Target {
  server: ServerProcess;
  sql: pg.Pool;
  /** The database itself (not through the proxy): where its rows' locks are sampled. */
  databaseUrl: string;
  dataDir: string;
  proxyPid?: number;
  /** Creates a scenario's tenant and campaigns, for a server that serves issueCoupon alone (the bare one); else through its API. */
  setUp?: (scenario: CouponScenario) => Promise<void>;
}

/**
 * One run of `scenario` through a server's HTTP endpoint, its invariants counted in SQL afterwards;
 * the overspend, the budget left when the first refusal came and at the end (`hot`: one campaign),
 * the budget row's hold time from the server's metrics, and the CPU each process used.
 */
async function throughEndpoint(
  target: Target,
  scenario: CouponScenario,
  clients: number,
  send: SendOptions = {},
  hot = false,
): Promise<Figures> {
  const { server, sql } = target;
  groups.runOnly(target.proxyPid ? [server.child.pid!, target.proxyPid] : [server.child.pid!]);
  const client = new LoadClient(server.url, clients, { requestTimeoutMs: NO_ANSWER_MS });
  const total = scenario.members.length * scenario.campaigns.length * scenario.sends;
  const retriesBefore = await scrapeCounter(server.metricsUrl, 'transaction_retries_total');
  const batchesBefore = await batchCounts(server.metricsUrl);
  const locks = target.proxyPid ? await startLockSampler(target.databaseUrl, scenario.tenantId) : null;
  let firstRefusal: Promise<number> | null = null;
  const cpu = measureCpu(() => ({
    server: [server.child.pid!],
    PostgreSQL: postgresPids(target.dataDir),
    ...(target.proxyPid ? { 'delay proxy': [target.proxyPid] } : {}),
  }));
  try {
    const load = couponLoad(scenario, total, send);
    const setUp = target.setUp;
    const result = await runLoad({
      client,
      sessions: SESSIONS,
      scenario: setUp ? { ...load, setup: () => setUp(scenario) } : load,
      concurrency: clients,
      amount: { requests: total },
      sql,
      onAnswer: (outcome) => {
        if (hot && outcome === 'BUDGET_EXCEEDED' && firstRefusal === null) {
          firstRefusal = campaignStandings(sql, scenario.tenantId).then(([c]) => (c ? strandedYen(c) : 0));
        }
      },
    });
    const used = cpu();
    const heldRowSeconds = await locks?.stop();
    const standing = await campaignStandings(sql, scenario.tenantId);
    const issued = standing.reduce((sum, c) => sum + c.coupons_yen, 0) / (scenario.campaigns[0]?.discountYen ?? 1);
    return {
      requestsPerSecond: result.requestsPerSecond,
      p99: result.latency.p99,
      violations:
        (result.violations?.length ?? 0) +
        (send.idempotencyKeys ? (await keptAnswerViolations(sql, scenario.tenantId, result.outcomes)).length : 0),
      retries: (await scrapeCounter(server.metricsUrl, 'transaction_retries_total')) - retriesBefore,
      tryAgain: result.outcomes['TRY_AGAIN'] ?? 0,
      overspendYen: standing.reduce((sum, c) => sum + Math.max(0, c.coupons_yen - c.budget_yen), 0),
      strandedAtFirstRefusalYen: hot ? await (firstRefusal ?? Promise.resolve(0)) : null,
      strandedAtEndYen: hot ? standing.reduce((sum, c) => sum + strandedYen(c), 0) : null,
      lockHoldMs: heldRowSeconds !== undefined && issued > 0 ? (heldRowSeconds * 1000) / issued : null,
      cpuMsPerRequest: Object.fromEntries(Object.entries(used.parts).map(([part, seconds]) => [part, (seconds * 1000) / result.requests])),
      machineBusyCores: used.machineBusy / used.wall,
      batching: batchingOf(batchesBefore, await batchCounts(server.metricsUrl), result.requests),
      loadAverage: os.loadavg()[0]!,
    };
  } finally {
    client.close();
  }
}

/** The issue coalescer's counters on a server's /metrics (0 on a server that batches nothing). */
async function batchCounts(metricsUrl: string) {
  return {
    batches: await scrapeCounter(metricsUrl, 'coupon_issue_batches_total'),
    members: await scrapeCounter(metricsUrl, 'coupon_issue_batched_members_total'),
  };
}

function batchingOf(
  before: { batches: number; members: number },
  after: { batches: number; members: number },
  requests: number,
): Batching | null {
  const batches = after.batches - before.batches;
  const members = after.members - before.members;
  return batches > 0 ? { share: members / requests, membersPerBatch: members / batches } : null;
}

/**
 * The raw ceiling: the same unit of work (issueCouponForSession: the same prepared statements,
 * runner, idempotency and audit code, the same pool size) called in this process straight through
 * pg, without HTTP or GraphQL, with the same number of requests in flight.
 */
function rawTarget(databaseUrl: string, dataDir: string, sql: pg.Pool) {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    NODE_ENV: 'production',
    ACTION_SECRET: BENCH_ACTION_SECRET,
    COUPON_ISSUE_BATCH_MAX: '1',
  });
  const log = createLogger('silent');
  const database = createDatabase(
    {
      connectionString: databaseUrl,
      max: config.database.poolMax,
      acquireTimeoutMs: config.database.poolAcquireTimeoutMs,
      applicationName: 'bench-raw',
      preparedStatements: config.database.preparedStatements,
    },
    log,
  );
  const services = buildServices(config, database, log);
  const retryCount = async () => (await services.metrics.transactionRetries.get()).values.reduce((sum, v) => sum + v.value, 0);
  const contextFor = (
    tenantId: string,
    memberId: string,
    idempotency: AccessContexts['member']['idempotency'],
  ): AccessContexts['member'] => ({
    services,
    database: databaseRunners(database.db, services.transactions),
    session: { role: 'user', tenantId, userId: memberId },
    requestId: randomUUID(),
    deadline: Date.now() + config.requests.deadlineMs,
    turn: UNGATED_TURN,
    signal: new AbortController().signal,
    databaseQueue: createDatabaseQueue(),
    log,
    idempotencyKeyHeader: idempotency?.key ?? null,
    idempotency,
    report: {},
  });

  const setUp = (scenario: CouponScenario) => insertCouponScenario(database.db, services.transactions, scenario);

  /** `keyed`: every request with a key of its own, as the keyed row sends them. */
  async function run(scenario: CouponScenario, clients: number, keyed = false): Promise<Figures> {
    // No server of the bench's runs beside the raw row, which has none.
    groups.runOnly([]);
    await setUp(scenario);
    const retriesBefore = await retryCount();
    const started = performance.now();
    const cpu = measureCpu(() => ({ PostgreSQL: postgresPids(dataDir) }));
    const outcomes = await runReleasedTogether(
      couponRequests(scenario, 1).map((request, index) => async () => {
        const begun = performance.now();
        const input = { campaignId: request.campaignId };
        // The key as the keyed row sends it, fingerprinted as the endpoint does: the operation's document and its variables.
        const idempotency = keyed
          ? { key: `${scenario.tenantId}-${index}`, fingerprint: fingerprint('IssueCoupon', ISSUE_COUPON_QUERY, { input }) }
          : null;
        try {
          const result = await issueCouponForSession(contextFor(scenario.tenantId, request.memberId, idempotency), input);
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
    const used = cpu();
    const counts = countBy(outcomes, (o) => o.outcome);
    const invariants = await checkCouponInvariants(sql, scenario, counts['ISSUED'] ?? 0);
    const standing = await campaignStandings(sql, scenario.tenantId);
    return {
      requestsPerSecond: (outcomes.length / wallMs) * 1000,
      p99: summarize(outcomes.map((o) => o.latencyMs)).p99,
      violations: invariants.violations.length + (keyed ? (await keptAnswerViolations(sql, scenario.tenantId, counts)).length : 0),
      retries: (await retryCount()) - retriesBefore,
      tryAgain: counts['TRY_AGAIN'] ?? 0,
      overspendYen: standing.reduce((sum, c) => sum + Math.max(0, c.coupons_yen - c.budget_yen), 0),
      strandedAtFirstRefusalYen: null,
      strandedAtEndYen: null,
      lockHoldMs: null,
      // PostgreSQL's alone: this process runs the load generator beside the unit.
      cpuMsPerRequest: { PostgreSQL: (used.parts['PostgreSQL']! * 1000) / outcomes.length },
      machineBusyCores: 0,
      batching: null,
      loadAverage: os.loadavg()[0]!,
    };
  }
  return { run, setUp, close: () => database.close() };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** CPU milliseconds the server process used per request, from its own CPU time over the run; null for a row without one (raw). */
const serverCpuMs = (figures: Figures) => figures.cpuMsPerRequest['server'] ?? null;

/** CPU milliseconds PostgreSQL (all its processes) used per request over the run. */
const postgresCpuMs = (figures: Figures) => figures.cpuMsPerRequest['PostgreSQL'] ?? null;

/** The median of a figure over a row's runs, or '-' where the row has none. */
const medianOf = (row: Row, figure: (f: Figures) => number | null, digits: number) => {
  const values = row.runs.map(figure).filter((v): v is number => v !== null);
  return values.length ? median(values).toFixed(digits) : '-';
};

/** The table's columns, in order: a new column is one more entry here. */
const COLUMNS: Column[] = [
  { header: 'strategy', cell: (row) => row.label },
  { header: 'clients', cell: (row) => String(row.clients) },
  { header: 'req/s', cell: (row) => medianOf(row, (r) => r.requestsPerSecond, 0) },
  {
    header: 'req/s range',
    cell: (row) => {
      const rates = row.runs.map((r) => r.requestsPerSecond);
      return `${Math.min(...rates).toFixed(0)}-${Math.max(...rates).toFixed(0)}`;
    },
  },
  { header: 'p99 ms', cell: (row) => medianOf(row, (r) => r.p99, 1) },
  { header: 'server CPU ms/req', cell: (row) => medianOf(row, serverCpuMs, 2) },
  { header: 'PostgreSQL CPU ms/req', cell: (row) => medianOf(row, postgresCpuMs, 2) },
  { header: 'violations', cell: (row) => String(Math.max(...row.runs.map((r) => r.violations))) },
  { header: 'retries', cell: (row) => medianOf(row, (r) => r.retries, 0) },
  { header: 'TRY_AGAIN', cell: (row) => String(Math.max(...row.runs.map((r) => r.tryAgain))) },
  { header: 'overspend yen', cell: (row) => String(Math.max(...row.runs.map((r) => r.overspendYen))) },
  {
    header: 'stranded yen',
    cell: (row) => {
      const first = medianOf(row, (r) => r.strandedAtFirstRefusalYen, 0);
      return first === '-' ? '-' : `${first} / ${medianOf(row, (r) => r.strandedAtEndYen, 0)}`;
    },
  },
  { header: 'lock hold ms', cell: (row) => medianOf(row, (r) => r.lockHoldMs, 2) },
  {
    header: 'issues per batch (share batched)',
    cell: (row) => {
      const mean = medianOf(row, (r) => r.batching?.membersPerBatch ?? null, 1);
      return mean === '-' ? '-' : `${mean} (${medianOf(row, (r) => (r.batching ? r.batching.share * 100 : null), 0)} %)`;
    },
  },
  {
    header: 'load average',
    cell: (row) => {
      const loads = row.runs.map((r) => r.loadAverage);
      return `${medianOf(row, (r) => r.loadAverage, 1)} (${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)})`;
    },
  },
];

function table(rows: Row[]): string {
  const lines = [
    `| ${COLUMNS.map((c) => c.header).join(' | ')} |`,
    `| ${COLUMNS.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${COLUMNS.map((c) => c.cell(row)).join(' | ')} |`),
  ];
  return lines.join('\n');
}

/** The median over repetitions of one row's figure (req/s unless told) divided by another's in the same repetition. */
function pairedRatio(row: Row, base: Row, figure: (f: Figures) => number | null = (f) => f.requestsPerSecond): number {
  return median(row.runs.map((run, i) => (figure(run) ?? NaN) / (figure(base.runs[i]!) ?? NaN)));
}

/** A batched row against its unbatched row at the same clients: free when it is quiet, half PostgreSQL's CPU once batches form. */
function batchedVerdicts(batched: Row, unbatched: Row, verdict: (ok: boolean, text: string) => string): string[] {
  const lines: string[] = [];
  const { label, clients } = batched;
  const rate = pairedRatio(batched, unbatched);
  const [p99, unbatchedP99] = [batched, unbatched].map((r) => median(r.runs.map((run) => run.p99))) as [number, number];
  lines.push(`INFO ${label} at ${clients}: ${rate.toFixed(2)}x the req/s, p99 ${unbatchedP99.toFixed(1)} -> ${p99.toFixed(1)} ms`);
  if (QUIET_CLIENTS.includes(clients)) {
    lines.push(
      verdict(
        p99 <= unbatchedP99 + QUIET_P99_MS && rate >= QUIET_RATE,
        `${label} at ${clients} clients reads as unbatched: p99 ${p99.toFixed(1)} against ${unbatchedP99.toFixed(1)} ms (target at most ${QUIET_P99_MS} ms above), ${rate.toFixed(2)}x the req/s (target at least ${QUIET_RATE}x, median of the interleaved pairs)`,
      ),
    );
  }
  if (clients >= BATCHING_CLIENTS) {
    const cpu = pairedRatio(batched, unbatched, postgresCpuMs);
    lines.push(
      verdict(
        cpu <= 0.5,
        `${label} at ${clients}: PostgreSQL CPU per request ${cpu.toFixed(2)}x the unbatched row's (${medianOf(batched, postgresCpuMs, 2)} vs ${medianOf(unbatched, postgresCpuMs, 2)} ms; target at most 0.5x, median of the interleaved pairs)`,
      ),
    );
  }
  if (label === LABEL.hotOneSlotBatched) {
    lines.push(verdict(rate >= 1.25, `hot campaign, one budget row, batched: ${rate.toFixed(2)}x the unbatched req/s (target 1.25x)`));
  }
  if (label === LABEL.oursBatched && clients === FEATURE_CLIENTS) {
    lines.push(
      verdict(
        p99 <= unbatchedP99 + 5,
        `batched p99 at ${clients} clients ${p99.toFixed(1)} ms against ${unbatchedP99.toFixed(1)} unbatched (target at most 5 ms above)`,
      ),
    );
  }
  return lines;
}

function targets(rows: Row[]): string[] {
  const find = (label: string, clients: number) => rows.find((r) => r.label === label && r.clients === clients);
  const verdict = (ok: boolean, text: string) => `${ok ? 'MET ' : 'MISS'} ${text}`;
  const lines: string[] = [];
  /** The naive twins, there to show what the checks catch. */
  const isNaive = (r: Row) => r.label === LABEL.naive || r.label.startsWith(LABEL.hotSixteenSlotsNaive);
  const correct = rows.filter((r) => !isNaive(r));
  lines.push(
    verdict(
      correct.every((r) => r.runs.every((run) => run.violations === 0)),
      'zero invariant violations for every correct strategy in every run',
    ),
  );
  const naive = rows.find((r) => r.label === LABEL.naive);
  if (naive)
    lines.push(
      verdict(
        naive.runs.some((run) => run.violations > 0),
        'the naive strategy shows violations in the same run',
      ),
    );
  const ours32 = find(LABEL.ours, 32);
  const bare32 = find(LABEL.bare, 32);
  if (ours32 && bare32) {
    const rate = pairedRatio(ours32, bare32);
    lines.push(
      verdict(
        rate >= 0.8,
        `endpoint at 32 clients against the same unit behind bare node:http: ${rate.toFixed(2)} of the req/s (target 0.8, median of the interleaved pairs)`,
      ),
    );
    const cpu = pairedRatio(ours32, bare32, serverCpuMs);
    lines.push(
      verdict(
        cpu <= 1.4,
        `endpoint's server CPU per request against the bare server's at 32 clients: ${cpu.toFixed(2)}x (${medianOf(ours32, serverCpuMs, 2)} vs ${medianOf(bare32, serverCpuMs, 2)} ms; target at most 1.4x, median of the interleaved pairs)`,
      ),
    );
  }
  // Batching is the default configuration: the endpoint as shipped against the same unit, batched, behind the bare server.
  const oursBatched32 = find(LABEL.oursBatched, 32);
  const bareBatched32 = find(LABEL.bareBatched, 32);
  if (oursBatched32 && bareBatched32) {
    const rate = pairedRatio(oursBatched32, bareBatched32);
    const cpu = pairedRatio(oursBatched32, bareBatched32, serverCpuMs);
    lines.push(
      `INFO batched endpoint (the default configuration) at 32 clients against the batched bare server: ${rate.toFixed(2)} of the req/s, server CPU ${cpu.toFixed(2)}x (${medianOf(oursBatched32, serverCpuMs, 2)} vs ${medianOf(bareBatched32, serverCpuMs, 2)} ms; median of the interleaved pairs)`,
    );
  }
  const bareGraphQL32 = find(LABEL.bareGraphQL, 32);
  if (bare32 && bareGraphQL32) {
    lines.push(
      `INFO GraphQL execution alone (graphql-jit on the schema, no Yoga or envelop) behind the bare server against the unit called directly: ${pairedRatio(bareGraphQL32, bare32).toFixed(2)} of the req/s, server CPU ${pairedRatio(bareGraphQL32, bare32, serverCpuMs).toFixed(2)}x (${medianOf(bareGraphQL32, serverCpuMs, 2)} vs ${medianOf(bare32, serverCpuMs, 2)} ms)`,
    );
  }
  const raw32 = find(LABEL.raw, 32);
  if (ours32 && raw32) {
    lines.push(
      `INFO endpoint at 32 clients against the raw pg row (no HTTP, no load generator's client): ${pairedRatio(ours32, raw32).toFixed(2)} of the req/s`,
    );
  }
  const rawKeyed32 = find(LABEL.rawKeyed, 32);
  if (raw32 && rawKeyed32) {
    lines.push(
      `INFO the key at the unit itself (no HTTP, no GraphQL): the raw pg row keyed against unkeyed, ${pairedRatio(rawKeyed32, raw32).toFixed(2)} of the req/s, PostgreSQL CPU ${medianOf(rawKeyed32, postgresCpuMs, 2)} vs ${medianOf(raw32, postgresCpuMs, 2)} ms per request`,
    );
  }
  const traced = find(LABEL.traced, 32);
  if (ours32 && traced) {
    const ratio = pairedRatio(traced, ours32);
    lines.push(
      verdict(
        ratio >= 0.75,
        `tracing on (every request sampled and exported) against off: ${ratio.toFixed(2)} of the req/s (target 0.75, median of the interleaved pairs)`,
      ),
    );
  }
  const pairs: [string, string, number][] = [
    [LABEL.keyed, `${LABEL.keyed} against ${LABEL.ours}`, 0.9],
    [LABEL.actions, `${LABEL.actions} against ${LABEL.ours}`, 0.9],
  ];
  for (const [label, text, target] of pairs) {
    const other = find(label, 32);
    if (!ours32 || !other) continue;
    const ratio = pairedRatio(other, ours32);
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
  const notHot = find(LABEL.notHot, HOT_CLIENTS);
  if (one && notHot) {
    const ratio = pairedRatio(one, notHot);
    lines.push(
      verdict(ratio >= 0.9, `hot campaign, one budget row against the not-hot campaigns: ${ratio.toFixed(2)} of the req/s (target 0.9)`),
    );
  }
  for (const [batchedLabel, unbatchedLabel] of BATCHED_PAIRS) {
    for (const batched of rows.filter((r) => r.label === batchedLabel)) {
      const unbatched = find(unbatchedLabel, batched.clients);
      if (unbatched) lines.push(...batchedVerdicts(batched, unbatched, verdict));
    }
  }
  const strands = (r: Row) => r.runs.some((run) => (run.strandedAtFirstRefusalYen ?? 0) + (run.strandedAtEndYen ?? 0) > 0);
  const hotRows = correct.filter((r) => r.runs.some((run) => run.strandedAtEndYen !== null));
  const [hotHere, hotBefore] = [hotRows.filter((r) => !r.label.endsWith(BEFORE)), hotRows.filter((r) => r.label.endsWith(BEFORE))];
  if (hotHere.length) {
    const stranding = hotHere.filter(strands);
    lines.push(
      verdict(
        stranding.length === 0,
        `no stranded yen in any correct hot row, at the first refusal or at the end${stranding.length ? ` (${stranding.map((r) => r.label).join(', ')})` : ''}`,
      ),
    );
  }
  for (const row of hotBefore.filter(strands)) {
    lines.push(`INFO ${row.label} strands ${medianOf(row, (r) => r.strandedAtEndYen, 0)} yen (median, at the end)`);
  }
  const naiveSplit = rows.find((r) => r.label === LABEL.hotSixteenSlotsNaive);
  if (naiveSplit) {
    lines.push(
      verdict(
        naiveSplit.runs.every((run) => (run.strandedAtEndYen ?? 0) > 0),
        `the naive split strands yen in every run: ${medianOf(naiveSplit, (r) => r.strandedAtEndYen, 0)} yen (median)`,
      ),
    );
  }
  const overspent = rows.filter((r) => !isNaive(r) && r.runs.some((run) => run.overspendYen > 0));
  lines.push(
    verdict(
      overspent.length === 0,
      `no overspend in any correct row${overspent.length ? ` (${overspent.map((r) => r.label).join(', ')})` : ''}`,
    ),
  );
  // Each row against the same row on the baseline, in the same passes.
  for (const row of rows) {
    const before = rows.find((r) => r.label === `${row.label}${BEFORE}` && r.clients === row.clients);
    if (!before) continue;
    const holds = [before, row].map((r) => medianOf(r, (f) => f.lockHoldMs, 2));
    lines.push(
      `INFO ${row.label} at ${row.clients}: ${pairedRatio(row, before).toFixed(2)}x the req/s of before, ` +
        `p99 ${medianOf(before, (f) => f.p99, 1)} -> ${medianOf(row, (f) => f.p99, 1)} ms, lock hold ${holds[0]} -> ${holds[1]} ms`,
    );
  }
  return lines;
}

/** The median round trip of `select 1` on `databaseUrl`, in ms: what the proxy adds, measured. */
async function roundTripMs(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await client.query('select 1');
      times.push(performance.now() - started);
    }
    return median(times);
  } finally {
    await client.end();
  }
}

async function migrate(databaseUrl: string): Promise<void> {
  const config = loadConfig({ DATABASE_URL: databaseUrl, NODE_ENV: 'production', ACTION_SECRET: BENCH_ACTION_SECRET });
  const opened = await openDatabase({ config, log: createLogger('silent'), schema: 'migrate' }, 'bench-migrate');
  await opened.close();
}

/** How one of a side's servers runs: its strategy, through the delay proxy or not, what else it is given. */
interface ServerSpec {
  strategy: string;
  distant?: boolean;
  env?: Record<string, string>;
  entry?: string;
  setUp?: Target['setUp'];
}

/** The servers every side has: ours, unbatched and batched, near and through the delay proxy, and SERIALIZABLE through it. */
const SIDE_SERVERS: Record<string, ServerSpec> = {
  conditional: { strategy: 'conditional' },
  batched: { strategy: 'conditional', env: { COUPON_ISSUE_BATCH_MAX: BATCH_MAX } },
  distant: { strategy: 'conditional', distant: true },
  'distant serializable': { strategy: 'serializable', distant: true },
};

/** This checkout's servers besides: the peers, the slots' naive twin, and batching on (a baseline's servers know none of them). */
const OWN_SERVERS: Record<string, ServerSpec> = {
  ...Object.fromEntries(PEERS.map((peer) => [peer.server, { strategy: peer.server }])),
  // The slots' naive twin (test/naive/budget-split.ts): its hot row strands a remainder in every slot.
  'distant naive split': { strategy: 'naive-split', distant: true },
  'distant batched': { strategy: 'conditional', distant: true, env: { COUPON_ISSUE_BATCH_MAX: BATCH_MAX } },
};

/** The bench's bare node:http server around the unit (bare-server.ts), its scenario set up as the raw row's. */
const BARE_SERVER = (setUp: Target['setUp']): ServerSpec => ({ strategy: 'conditional', entry: 'test/load/bare-server.ts', setUp });

/**
 * One database with its delay proxy, and the servers of one checkout on it (the baseline's, or
 * this one's). A server starts when a row first needs it, and is warmed up then.
 */
async function startSide(project: string | null, withPeers: boolean, newRunId: () => string) {
  const database = await startScratchDatabase();
  // This checkout's schema before any row: the raw row and the bare server (which never migrates) may come first.
  // A baseline's database is migrated by its own first server.
  if (project === null) await migrate(database.databaseUrl);
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  // An idle connection the server drops must not take the whole run down with it.
  sql.on('error', (error) => console.error(`database connection lost: ${error.message}`));
  const proxy = await startDelayProxyProcess(database.databaseUrl, ONE_WAY_DELAY_MS);
  groups.add(proxy.pid);
  const specs = new Map(Object.entries({ ...SIDE_SERVERS, ...(withPeers ? OWN_SERVERS : {}) }));
  const started = new Map<string, Promise<Target>>();
  const launch = async (key: string): Promise<Target> => {
    const spec = specs.get(key);
    if (!spec) throw new Error(`no server "${key}" on this side`);
    const targetOf = (server: ServerProcess): Target => ({
      server,
      sql,
      databaseUrl: database.databaseUrl,
      dataDir: database.dataDir,
      ...(spec.distant ? { proxyPid: proxy.pid } : {}),
      ...(spec.setUp ? { setUp: spec.setUp } : {}),
    });
    // A server that reaches PostgreSQL through the proxy connects to it as it starts.
    groups.runOnly(spec.distant ? [proxy.pid] : []);
    const server = await startServerProcess(
      spec.entry ?? 'test/load/bench-server.ts',
      { ...benchServerEnv(spec.distant ? proxy.databaseUrl : database.databaseUrl, spec.strategy), ...spec.env },
      {
        ...(project ? { project } : {}),
        // A fresh process compiles and optimizes its code on its first requests: keep that out of the figures.
        warmUp: async (started) => {
          groups.add(started.child.pid!);
          const target = targetOf(started);
          await throughEndpoint(target, referenceScenario(newRunId(), WARM_UP_MEMBERS), 32);
          if (key === 'conditional') {
            await throughEndpoint(target, referenceScenario(newRunId(), WARM_UP_MEMBERS), 32, { idempotencyKeys: true, viaActions: true });
          }
        },
      },
    );
    return targetOf(server);
  };
  return {
    database,
    sql,
    proxy,
    /** Adds a server this side may start. */
    define(key: string, spec: ServerSpec) {
      specs.set(key, spec);
    },
    /** The server `key`, started and warmed up the first time it is asked for. */
    target(key: string): Promise<Target> {
      let target = started.get(key);
      if (!target) started.set(key, (target = launch(key)));
      return target;
    },
    async stop() {
      for (const target of started.values()) await (await target.catch(() => null))?.server.stop();
      await proxy.stop();
      await sql.end();
      await database.stop();
    },
  };
}

async function main() {
  const { concurrency, repeats, members, json, baseline, calibration, only } = parseArgs(process.argv.slice(2));
  const machine = machineDescription();
  const commit = currentCommit();
  console.log(`bench on ${machine}, commit ${commit}${baseline ? `, against the checkout in ${baseline}` : ''}`);
  const collector = await startSpanSink();
  const sides: Awaited<ReturnType<typeof startSide>>[] = [];
  let raw: ReturnType<typeof rawTarget> | null = null;
  let run = 0;
  const runId = () => `b${(run++).toString(36)}${Date.now().toString(36)}`;
  const reference = (id: string, slots = 1, scaled = members) => {
    const scenario = referenceScenario(id, scaled);
    for (const campaign of scenario.campaigns) campaign.budgetSlots = slots;
    return scenario;
  };
  const leased = (id: string) => {
    const scenario = hotCampaignScenario(id, HOT_MEMBERS, 1);
    for (const campaign of scenario.campaigns) campaign.budgetLeaseCoupons = HOT_LEASE_COUPONS;
    return scenario;
  };
  try {
    const here = await startSide(null, true, runId);
    sides.push(here);
    const before = baseline ? await startSide(baseline, false, runId) : null;
    if (before) sides.push(before);
    // Tracing costs nothing when it is off (every other row); this row shows what it costs when on.
    here.define('traced', {
      strategy: 'conditional',
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_on' },
    });
    const rawUnit = rawTarget(here.database.databaseUrl, here.database.dataDir, here.sql);
    raw = rawUnit;
    here.define('bare', BARE_SERVER(rawUnit.setUp));
    here.define('bare batched', { ...BARE_SERVER(rawUnit.setUp), env: { COUPON_ISSUE_BATCH_MAX: BATCH_MAX } });
    here.define('bare graphql', { ...BARE_SERVER(rawUnit.setUp), env: { BARE_EXECUTES: 'graphql' } });

    const rows: Row[] = [];
    const wanted = (label: string) => only.length === 0 || only.some((text) => label.includes(text));
    const row = (label: string, clients: number, measure: Row['run']) => {
      if (wanted(label)) rows.push({ label, clients, run: measure, runs: [] });
    };
    /** A row on this checkout, and the same on the baseline's right after it, so that each pair meets the same machine. */
    const paired = (label: string, clients: number, measure: (side: (typeof sides)[number], id: string) => Promise<Figures>) => {
      row(label, clients, (id) => measure(here, id));
      if (before) row(`${label}${BEFORE}`, clients, (id) => measure(before, id));
    };
    const hotMembers = Math.round(HOT_MEMBERS / 6);
    for (const clients of concurrency) {
      // Each comparison's rows sit next to each other, so every pair is measured under the same load of the machine.
      paired(LABEL.ours, clients, async (side, id) => throughEndpoint(await side.target('conditional'), reference(id), clients));
      paired(LABEL.oursBatched, clients, async (side, id) => throughEndpoint(await side.target('batched'), reference(id), clients));
      // One client contends with nobody: there only what batching costs when it is quiet is measured.
      if (clients === 1) continue;
      row(LABEL.bare, clients, async (id) => throughEndpoint(await here.target('bare'), reference(id), clients));
      if (clients === FEATURE_CLIENTS) {
        row(LABEL.bareBatched, clients, async (id) => throughEndpoint(await here.target('bare batched'), reference(id), clients));
        row(LABEL.bareGraphQL, clients, async (id) => throughEndpoint(await here.target('bare graphql'), reference(id), clients));
        paired(LABEL.keyed, clients, async (side, id) =>
          throughEndpoint(await side.target('conditional'), reference(id), clients, { idempotencyKeys: true }),
        );
        paired(LABEL.actions, clients, async (side, id) =>
          throughEndpoint(await side.target('conditional'), reference(id), clients, { viaActions: true }),
        );
        row(LABEL.traced, clients, async (id) => throughEndpoint(await here.target('traced'), reference(id), clients));
      }
      row(LABEL.raw, clients, (id) => raw!.run(reference(id), clients));
      if (clients === FEATURE_CLIENTS) row(LABEL.rawKeyed, clients, (id) => raw!.run(reference(id), clients, true));
      for (const peer of PEERS)
        row(peer.label, clients, async (id) => throughEndpoint(await here.target(peer.server), reference(id), clients));
      paired(LABEL.oursSlotted, clients, async (side, id) =>
        throughEndpoint(await side.target('conditional'), reference(id, HOT_SLOTS), clients),
      );
    }
    const hot = async (side: (typeof sides)[number], key: string, scenario: CouponScenario) =>
      throughEndpoint(await side.target(key), scenario, HOT_CLIENTS, {}, true);
    paired(LABEL.hotOneSlot, HOT_CLIENTS, (side, id) => hot(side, 'distant', hotCampaignScenario(id, HOT_MEMBERS, 1)));
    row(LABEL.hotOneSlotBatched, HOT_CLIENTS, (id) => hot(here, 'distant batched', hotCampaignScenario(id, HOT_MEMBERS, 1)));
    paired(LABEL.hotSixteenSlots, HOT_CLIENTS, (side, id) => hot(side, 'distant', hotCampaignScenario(id, HOT_MEMBERS, HOT_SLOTS)));
    row(LABEL.hotSixteenSlotsNaive, HOT_CLIENTS, (id) => hot(here, 'distant naive split', hotCampaignScenario(id, HOT_MEMBERS, HOT_SLOTS)));
    paired(LABEL.hotLeases, HOT_CLIENTS, (side, id) => hot(side, 'distant', leased(id)));
    paired(LABEL.hotSerializable, HOT_CLIENTS, (side, id) => hot(side, 'distant serializable', hotCampaignScenario(id, HOT_MEMBERS, 1)));
    paired(LABEL.notHot, HOT_CLIENTS, async (side, id) =>
      throughEndpoint(await side.target('distant'), reference(id, 1, hotMembers), HOT_CLIENTS),
    );
    row(LABEL.notHotBatched, HOT_CLIENTS, async (id) =>
      throughEndpoint(await here.target('distant batched'), reference(id, 1, hotMembers), HOT_CLIENTS),
    );

    // The raw row runs in this process: its code, too, is compiled before it is measured.
    if (rows.some((r) => r.label === LABEL.raw || r.label === LABEL.rawKeyed)) {
      await rawUnit.run(referenceScenario(runId(), WARM_UP_MEMBERS), 32);
      await rawUnit.run(referenceScenario(runId(), WARM_UP_MEMBERS), 32, true);
    }
    for (let repeat = 1; repeat <= repeats; repeat++) {
      // Every other pass runs backwards, so that a drift of the machine's load favours no row.
      for (const measured of repeat % 2 === 1 ? rows : [...rows].reverse()) {
        const figures = await measured.run(runId());
        measured.runs.push(figures);
        console.log(
          `  [${repeat}/${repeats}] ${measured.label} at ${measured.clients}: ${figures.requestsPerSecond.toFixed(0)} req/s, ` +
            `p99 ${figures.p99.toFixed(1)} ms, ${figures.violations} violations` +
            (figures.lockHoldMs !== null ? `, lock hold ${figures.lockHoldMs.toFixed(2)} ms` : '') +
            `, load average ${figures.loadAverage.toFixed(1)}`,
        );
      }
    }
    // The opening instant, an open model of its first second (test/load/sale-opens.ts): its own table, after the rows above.
    const sales = [
      { label: LABEL.saleOpens, target: 'distant' },
      { label: LABEL.saleOpensBatched, target: 'distant batched' },
    ]
      .filter(({ label }) => wanted(label))
      .map((sale) => ({ ...sale, runs: [] as SaleFigures[] }));
    for (let repeat = 1; repeat <= repeats; repeat++) {
      for (const sale of repeat % 2 === 1 ? sales : [...sales].reverse()) {
        const target = await here.target(sale.target);
        groups.runOnly([target.server.child.pid!, ...(target.proxyPid ? [target.proxyPid] : [])]);
        const figures = await saleOpens(target.server.url, here.sql, SESSIONS, runId());
        sale.runs.push(figures);
        console.log(
          `  [${repeat}/${repeats}] ${sale.label}: p50 ${figures.p50Ms.toFixed(1)} ms, p99 ${figures.p99Ms.toFixed(1)} ms, ` +
            `${figures.issued} issued, ${figures.notStartedAfter} NOT_STARTED after the instant, load average ${figures.loadAverage.toFixed(1)}`,
        );
      }
    }
    // The hold with the machine as quiet as it gets: one client, one budget row, through the proxy.
    const quiet =
      only.length === 0 ? await throughEndpoint(await here.target('distant'), hotCampaignScenario(runId(), 400, 1), 1, {}, true) : null;
    groups.runOnly([here.proxy.pid]);
    const rttMs = await roundTripMs(here.proxy.databaseUrl);
    const directRttMs = await roundTripMs(here.database.databaseUrl);
    const requestsPerRun = members * 6;
    console.log(
      `\nCoupon reference scenario, ${requestsPerRun.toLocaleString('en')} requests per run (${members} members x 3 campaigns x 2 sends); ` +
        `hot campaign ${HOT_MEMBERS.toLocaleString('en')} requests per run at ${HOT_CLIENTS} clients through a ${ONE_WAY_DELAY_MS} ms-each-way proxy ` +
        `(select 1 took ${rttMs.toFixed(2)} ms through it, ${directRttMs.toFixed(2)} ms without).\n` +
        `Every row ran ${repeats} times, all rows interleaved (every other pass in reverse order); req/s, p99, stranded and lock hold are medians, ` +
        `violations, overspend and TRY_AGAIN the worst run. Stranded: yen that could still pay for coupons when the first BUDGET_EXCEEDED came / at the end. ` +
        `Lock hold: the time a budget row (slot or lease) was locked per coupon issued, sampled in PostgreSQL (rows at 1 ms). ${machine}, commit ${commit}:\n`,
    );
    console.log(table(rows));
    if (sales.length) {
      console.log(
        `\nSale opens: ${SALE.members.toLocaleString('en')} members arriving evenly over the first second after startsAt (open model), ` +
          `${SALE.budgetCoupons.toLocaleString('en')} coupons; latency of each member's first answer from its arrival; medians of ${repeats} runs:\n`,
      );
      console.log(saleTable(sales));
      for (const sale of sales) {
        const exact = sale.runs.every((r) => r.issued === SALE.budgetCoupons && r.notStartedAfter === 0 && r.violations.length === 0);
        console.log(
          `  ${exact ? 'MET ' : 'MISS'} ${sale.label}: ISSUED exactly the budget and no NOT_STARTED after the instant in every run` +
            (exact ? '' : ` (${[...new Set(sale.runs.flatMap((r) => r.violations))].join('; ')})`),
        );
      }
    }
    console.log('\nTargets:');
    for (const line of targets(rows)) console.log(`  ${line}`);
    if (quiet) {
      await writeCalibration(calibration, {
        machine,
        commit,
        rttMs,
        directRttMs,
        quietHoldMs: quiet.lockHoldMs ?? 0,
        rows: rows.filter((r) => !r.label.endsWith(BEFORE)),
      });
      console.log(`\ncalibration for npm run sim written to ${calibration}`);
    }
    if (json)
      await writeFile(
        json,
        `${JSON.stringify({ machine, commit, repeats, requestsPerRun, rows: rows.map(({ run: _run, ...r }) => r) }, null, 2)}\n`,
      );
  } finally {
    groups.continueAll();
    for (const side of sides) await side.stop();
    await raw?.close();
    await collector.close();
  }
}

/** What the simulation is calibrated with: the round trip, and per row its figures and the CPU per request of each process. */
async function writeCalibration(
  file: string,
  run: { machine: string; commit: string; rttMs: number; directRttMs: number; quietHoldMs: number; rows: Row[] },
) {
  const calibration: Calibration = {
    measured: new Date().toISOString().slice(0, 10),
    machine: run.machine,
    commit: run.commit,
    cores: os.cpus().length,
    proxyRttMs: 2 * ONE_WAY_DELAY_MS,
    rttMs: run.rttMs,
    directRttMs: run.directRttMs,
    quietHoldMs: run.quietHoldMs,
    hot: { clients: HOT_CLIENTS, members: HOT_MEMBERS, discountYen: 100, leaseCoupons: HOT_LEASE_COUPONS, slots: HOT_SLOTS },
    batchMax: Number(BATCH_MAX),
    rows: run.rows
      .filter((row) => row.clients === HOT_CLIENTS && row.label.includes('1 ms round trip') && !row.label.includes('naive'))
      .map((row) => ({
        label: row.label,
        requestsPerSecond: median(row.runs.map((r) => r.requestsPerSecond)),
        p99Ms: median(row.runs.map((r) => r.p99)),
        lockHoldMs: row.runs.some((r) => r.lockHoldMs !== null) ? median(row.runs.map((r) => r.lockHoldMs ?? 0)) : null,
        retriesPerRequest: median(row.runs.map((r) => r.retries)) / HOT_MEMBERS,
        strandedAtFirstRefusalYen:
          row.runs[0]!.strandedAtFirstRefusalYen === null ? null : median(row.runs.map((r) => r.strandedAtFirstRefusalYen ?? 0)),
        cpuMsPerRequest: Object.fromEntries(
          Object.keys(row.runs[0]!.cpuMsPerRequest).map((part) => [part, median(row.runs.map((r) => r.cpuMsPerRequest[part] ?? 0))]),
        ),
        machineBusyCores: median(row.runs.map((r) => r.machineBusyCores)),
        batching: row.runs.every((r) => r.batching)
          ? {
              share: median(row.runs.map((r) => r.batching!.share)),
              membersPerBatch: median(row.runs.map((r) => r.batching!.membersPerBatch)),
            }
          : null,
      })),
  };
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(calibration, null, 2)}\n`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
