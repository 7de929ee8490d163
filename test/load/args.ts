import { parseStages, StagesError, type Stage } from './schedule.js';
import { parseThreshold, ThresholdError, type Threshold } from './thresholds.js';

export const SCENARIOS = ['coupons', 'documents', 'huddles', 'checkout', 'operation'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface LoadArgs {
  scenario: ScenarioName;
  url: string | null;
  databaseUrl: string | null;
  concurrency: number;
  /** Open model: requests per second on a fixed schedule; null: the closed model (`concurrency` in flight). */
  rate: number | null;
  /** null with a duration; the default is the scenario's own size (coupons: the 1,800-request reference scenario). */
  requests: number | null;
  durationSeconds: number | null;
  json: string | null;
  report: string | null;
  secret: string | null;
  /** Send mutations with the typed client: resent with their key on TRY_AGAIN and network failures. */
  resend: boolean;
  /** Judged on the measured part; a crossed one exits 99. */
  thresholds: Threshold[];
  /** Stop at the first second a threshold can no longer be met. */
  abortOnFail: boolean;
  /** Seconds of load at the start that are sent but left out of the summary and the thresholds. */
  warmupSeconds: number;
  /** Open model: ramps of the arrival rate (from --rate, or 0), instead of a constant rate. */
  stages: Stage[] | null;
  /** --scenario operation: the GraphQL document, its variables (a JSON object, or an array rotated through), and the tenant. */
  document: string | null;
  variables: string | null;
  tenant: string | null;
  help: boolean;
}

export const LOAD_USAGE = `usage: npm run load -- --scenario coupons|documents|huddles|checkout|operation [options]

  --url URL            the /graphql endpoint to load; without it a server is started on a fresh
                       embedded database and stopped afterwards
  --database-url URL   the database behind --url, for the invariant check in SQL (as DATABASE_URL:
                       a multi-host URL with target_session_attrs=read-write checks the primary)
  --concurrency N      requests in flight (default 32); with --rate or --stages, the most
                       connections (default 256; a request waiting for one counts the wait)
  --rate R             open model: R requests per second, each sent at its scheduled time
                       whatever the server does; latency counts from that time. Without it,
                       the closed model keeps --concurrency requests in flight
  --stages SPEC        open model with ramps: 10s:100,30s:400,10s:0 ramps the arrival rate from
                       --rate (or 0) to 100/s over 10 s, to 400/s over 30 s, down to 0 over 10 s;
                       the stages set the run's length
  --requests N         how many measured requests (defaults: coupons 1,800, documents 3,000,
                       huddles 4,000, checkout 600, operation 1,000)
  --duration S         run for S measured seconds instead of a request count; what is unanswered
                       when they end counts as TIMED_OUT
  --warmup S           S seconds of load first, sent like the rest but left out of the summary
                       and the thresholds and reported apart (with --stages: the stages' first S s)
  --threshold EXPR     pass/fail on the measured part, repeatable: p50|p90|p95|p99|max<MS,
                       errors<PCT%, rate>R (answers per second); each printed with its value
  --abort-on-fail      stop at the first second a threshold can no longer be met
  --document FILE      --scenario operation: the GraphQL document of one operation of the schema
  --variables FILE     --scenario operation: its variables, a JSON object (or an array of objects
                       sent in turn); the members of the tenant take turns sending it
  --tenant ID          --scenario operation: the tenant to send as (default: one created for the run)
  --json FILE          write the summary as JSON
  --report FILE.html   write a self-contained HTML page (latency histogram, throughput over time)
  --secret S           send x-action-secret with the x-hasura-* headers (a server with ACTION_SECRET)
  --resend             send mutations as a frontend would, with the project's typed client: one
                       Idempotency-Key each, resent on TRY_AGAIN and network failures after
                       Retry-After; latency then covers every resend

Exit 0 when every invariant held and every threshold was met, 1 on an invariant violated,
99 on a threshold crossed (and no invariant violated), 2 on bad arguments.`;

export class UsageError extends Error {}

/** Connections for the open model when --concurrency is not given: enough that a stall shows as latency, not as refused sends. */
const OPEN_MODEL_CONNECTIONS = 256;

// coupons: 300 members x 3 campaigns x 2 sends, the reference scenario.
const DEFAULT_REQUESTS: Record<ScenarioName, number> = {
  coupons: 1_800,
  documents: 3_000,
  huddles: 4_000,
  checkout: 600,
  operation: 1_000,
};

/** A number of seconds above 0, fractions allowed. */
function seconds(flag: string, raw: string): number {
  const value = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw) || !(value > 0)) throw new UsageError(`${flag} needs a number of seconds above 0, got ${raw}`);
  return value;
}

function positive(flag: string, raw: string | undefined): number {
  const value = Number(raw);
  if (raw === undefined || !/^\d+$/.test(raw) || value < 1)
    throw new UsageError(`${flag} needs a whole number above 0, got ${raw ?? 'nothing'}`);
  return value;
}

export function parseLoadArgs(argv: string[]): LoadArgs {
  const args: LoadArgs = {
    scenario: 'coupons',
    url: null,
    databaseUrl: null,
    concurrency: 32,
    rate: null,
    requests: null,
    durationSeconds: null,
    json: null,
    report: null,
    secret: null,
    resend: false,
    thresholds: [],
    abortOnFail: false,
    warmupSeconds: 0,
    stages: null,
    document: null,
    variables: null,
    tenant: null,
    help: false,
  };
  let scenarioGiven = false;
  let concurrencyGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${flag} needs a value`);
      return next;
    };
    switch (flag) {
      case '--scenario': {
        const name = value();
        if (!(SCENARIOS as readonly string[]).includes(name))
          throw new UsageError(`unknown scenario "${name}"; choose ${SCENARIOS.join(', ')}`);
        args.scenario = name as ScenarioName;
        scenarioGiven = true;
        break;
      }
      case '--url':
        args.url = new URL(value()).toString();
        break;
      case '--database-url':
        args.databaseUrl = value();
        break;
      case '--concurrency':
        args.concurrency = positive(flag, value());
        concurrencyGiven = true;
        break;
      case '--rate':
        args.rate = positive(flag, value());
        break;
      case '--requests':
        args.requests = positive(flag, value());
        break;
      case '--duration':
        args.durationSeconds = positive(flag, value());
        break;
      case '--json':
        args.json = value();
        break;
      case '--report':
        args.report = value();
        break;
      case '--secret':
        args.secret = value();
        break;
      case '--resend':
        args.resend = true;
        break;
      case '--threshold':
        args.thresholds.push(readThreshold(value()));
        break;
      case '--abort-on-fail':
        args.abortOnFail = true;
        break;
      case '--warmup':
        args.warmupSeconds = seconds(flag, value());
        break;
      case '--stages':
        args.stages = readStages(value());
        break;
      case '--document':
        args.document = value();
        break;
      case '--variables':
        args.variables = value();
        break;
      case '--tenant':
        args.tenant = value();
        break;
      case '--help':
      case '-h':
        args.help = true;
        break;
      default:
        throw new UsageError(`unknown option ${flag}`);
    }
  }
  if (args.requests !== null && args.durationSeconds !== null) throw new UsageError('give --requests or --duration, not both');
  if (!scenarioGiven && !args.help) throw new UsageError('--scenario is required');
  checkCombinations(args);
  if (args.stages !== null) {
    // The stages set the length: what follows the warm-up is measured.
    const totalSeconds = args.stages.reduce((sum, stage) => sum + stage.durationMs, 0) / 1000;
    args.durationSeconds = totalSeconds - args.warmupSeconds;
  }
  if (args.requests === null && args.durationSeconds === null) args.requests = DEFAULT_REQUESTS[args.scenario];
  if ((args.rate !== null || args.stages !== null) && !concurrencyGiven) args.concurrency = OPEN_MODEL_CONNECTIONS;
  return args;
}

/** Options that only make sense together, or not at all together. */
function checkCombinations(args: LoadArgs): void {
  if (args.stages !== null && (args.requests !== null || args.durationSeconds !== null)) {
    throw new UsageError("--stages sets the run's length: give neither --requests nor --duration with it");
  }
  if (args.stages !== null) {
    const totalSeconds = args.stages.reduce((sum, stage) => sum + stage.durationMs, 0) / 1000;
    if (args.warmupSeconds >= totalSeconds)
      throw new UsageError(`--warmup ${args.warmupSeconds} leaves nothing of the stages' ${totalSeconds} s to measure`);
  }
  if (args.abortOnFail && args.thresholds.length === 0) throw new UsageError('--abort-on-fail needs a --threshold to judge');
  const operationOnly = (['document', 'variables', 'tenant'] as const).filter((key) => args[key] !== null);
  if (args.scenario !== 'operation' && operationOnly.length > 0) {
    throw new UsageError(`--${operationOnly[0]} is for --scenario operation`);
  }
  if (args.scenario === 'operation' && args.document === null && !args.help)
    throw new UsageError('--scenario operation needs --document FILE');
}

function readThreshold(expression: string): Threshold {
  try {
    return parseThreshold(expression);
  } catch (error) {
    if (error instanceof ThresholdError) throw new UsageError(`--threshold: ${error.message}`);
    throw error;
  }
}

function readStages(text: string): Stage[] {
  try {
    return parseStages(text);
  } catch (error) {
    if (error instanceof StagesError) throw new UsageError(`--stages: ${error.message}`);
    throw error;
  }
}
