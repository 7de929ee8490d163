export const SCENARIOS = ['coupons', 'documents', 'huddles'] as const;
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
  help: boolean;
}

export const LOAD_USAGE = `usage: npm run load -- --scenario coupons|documents|huddles [options]

  --url URL            the /graphql endpoint to load; without it a server is started on a fresh
                       embedded database and stopped afterwards
  --database-url URL   the database behind --url, for the invariant check in SQL (as DATABASE_URL:
                       a multi-host URL with target_session_attrs=read-write checks the primary)
  --concurrency N      requests in flight (default 32); with --rate, the most connections
                       (default 256; a request waiting for one counts the wait in its latency)
  --rate R             open model: R requests per second, each sent at its scheduled time
                       whatever the server does; latency counts from that time. Without it,
                       the closed model keeps --concurrency requests in flight
  --requests N         how many requests (coupons default: the reference scenario, 1,800)
  --duration S         run for S seconds instead of a request count
  --json FILE          write the summary as JSON
  --report FILE.html   write a self-contained HTML page (latency histogram, throughput over time)
  --secret S           send x-action-secret with the x-hasura-* headers (a server with ACTION_SECRET)
  --resend             send mutations as a frontend would, with the project's typed client: one
                       Idempotency-Key each, resent on TRY_AGAIN and network failures after
                       Retry-After; latency then covers every resend

Exit 0 when every invariant held, 1 on a violation, 2 on bad arguments.`;

export class UsageError extends Error {}

/** Connections for the open model when --concurrency is not given: enough that a stall shows as latency, not as refused sends. */
const OPEN_MODEL_CONNECTIONS = 256;

// coupons: 300 members x 3 campaigns x 2 sends, the reference scenario.
const DEFAULT_REQUESTS: Record<ScenarioName, number> = { coupons: 1_800, documents: 3_000, huddles: 4_000 };

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
  if (args.requests === null && args.durationSeconds === null) args.requests = DEFAULT_REQUESTS[args.scenario];
  if (args.rate !== null && !concurrencyGiven) args.concurrency = OPEN_MODEL_CONNECTIONS;
  return args;
}
