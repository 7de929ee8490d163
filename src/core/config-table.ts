/**
 * Every environment variable the configuration reads, in one table: its name, kind, default, range,
 * group and the sentence the docs give it. src/core/config.ts reads the groups in this order (a default
 * or a range may name a variable above it) and adds the checks that span variables;
 * `npm run docs:config` prints the table of docs/operations.md from these entries.
 */
import proxyaddr from 'proxy-addr';
import { ConfigError } from './config-error.js';
import {
  custom,
  duration,
  file,
  flag,
  folder,
  group,
  httpUrl,
  oneOf,
  optionalWholeNumber,
  parseHttpUrl,
  secret,
  text,
  portOrAny,
  wholeNumber,
  type Known,
} from './config-kinds.js';
import { DatabaseUrlError, parseDatabaseUrl } from './database-url.js';
import { parseJwtSecret } from './jwt-config.js';

/** pino's level names; anything else would reach pino as a raw exception. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Stripe's API. */
export const STRIPE_API_URL = 'https://api.stripe.com';

/**
 * Stripe keeps an idempotency key for at least 24 hours, then may prune it: a resend after that
 * could charge again. The reconciler stops resending an hour before.
 */
export const STRIPE_KEY_KEPT_MS = 24 * 3_600_000;
const RECONCILE_FOR_MAX_MS = STRIPE_KEY_KEPT_MS - 3_600_000;

/** Transaction 2 needs this much of a checkout's deadline after the call; the call is given the rest, up to PAYMENTS_TIMEOUT_MS. */
export const PAYMENT_RECORD_MARGIN_MS = 1_000;
/** Less than this left for the call: it is not sent, and the reconciler sends it. */
export const PAYMENT_CALL_MIN_MS = 200;

/** The migrator's settings when nothing configures them (a test's template, a tool). */
export const MIGRATION_DEFAULTS = {
  lockTimeoutMs: 200,
  statementTimeoutMs: 600_000,
  retryForMs: 60_000,
  lockWaitMs: 60_000,
};

export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
const EXPORTERS = ['otlp', 'console', 'none'];
/** The OTLP/HTTP traces URL the SDKs use when OTEL_TRACES_EXPORTER=otlp names no endpoint. */
export const DEFAULT_OTLP_TRACES_ENDPOINT = 'http://localhost:4318/v1/traces';
/** Probes and scrapes: a trace each every few seconds, saying nothing. */
const DEFAULT_UNTRACED_PATHS = ['/health', '/ready', '/metrics'];

const ANY_ORIGIN = '*';

function parseDatabaseUrlVariable(raw: string | null, known: Known, name: string): string | null {
  if (raw === null && !known.development()) {
    throw new ConfigError(
      name,
      `NODE_ENV=${known.nodeEnv()} needs DATABASE_URL: the embedded PostgreSQL is for development and tests (one local folder, no backups)`,
    );
  }
  if (raw === null) return null;
  try {
    parseDatabaseUrl(raw);
  } catch (error) {
    if (error instanceof DatabaseUrlError) throw new ConfigError(name, error.message);
    throw error;
  }
  return raw;
}

function parseTimeZone(raw: string | null, _known: Known, name: string): string {
  const zone = raw ?? 'Asia/Tokyo';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
  } catch {
    throw new ConfigError(name, `unknown IANA time zone "${zone}"`);
  }
  return zone;
}

function parseStripeSecretKey(raw: string | null, _known: Known, name: string): string | null {
  if (raw !== null && !/^(sk|rk)_(test|live)_[A-Za-z0-9_]{1,240}$/.test(raw)) {
    // The value itself never goes into a message: it is a secret.
    throw new ConfigError(name, 'expected a Stripe secret or restricted key (sk_live_…, sk_test_…, rk_live_…, rk_test_…)');
  }
  return raw;
}

/** STRIPE_API_URL: a scheme, a host and a port; the client adds Stripe's paths (/v1/…) itself. */
function parseStripeApiUrl(raw: string | null, _known: Known, name: string): string {
  if (raw === null) return STRIPE_API_URL;
  const url = new URL(parseHttpUrl(raw, name));
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError(name, `expected scheme://host[:port] with no path, query or credentials, got "${raw}"`);
  }
  return url.origin;
}

/** The call's default: what leaves transaction 2 its margin, at most half the deadline and 5 s. */
function fittingPaymentTimeout(known: Known): number {
  const deadlineMs = known.number('REQUEST_DEADLINE_MS');
  const fitting = Math.min(5_000, Math.floor(deadlineMs / 2), deadlineMs - PAYMENT_RECORD_MARGIN_MS);
  return Math.max(fitting, PAYMENT_CALL_MIN_MS);
}

/** CORS_ORIGINS: comma-separated origins such as https://app.example.com, or * for any. */
function parseOrigins(raw: string | null, known: Known, name: string): string[] {
  if (raw === null) return known.development() ? [ANY_ORIGIN] : [];
  const origins = raw
    .split(',')
    .map((origin) => origin.trim())
    .filter(Boolean);
  for (const origin of origins) {
    if (origin === ANY_ORIGIN) continue;
    let parsed: URL | null = null;
    try {
      parsed = new URL(origin);
    } catch {
      // reported below
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== origin) {
      throw new ConfigError(name, `"${origin}" is not an origin (expected scheme://host[:port] with no path or trailing slash)`);
    }
  }
  if (origins.includes(ANY_ORIGIN) && origins.length > 1) {
    throw new ConfigError(name, '* stands alone: either any origin or a list of origins');
  }
  return origins;
}

/** TRUST_PROXY: what proxy-addr accepts (addresses, CIDR ranges, its names), checked by compiling it. */
function parseTrustProxy(raw: string | null, _known: Known, name: string): string[] {
  if (raw === null) return [];
  const list = raw
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  try {
    proxyaddr.compile(list);
  } catch (error) {
    throw new ConfigError(
      name,
      `expected addresses, CIDR ranges or loopback, linklocal, uniquelocal separated by commas: ${(error as Error).message}`,
    );
  }
  return list;
}

function parseSamplerRatio(raw: string | null, _known: Known, name: string): number {
  const ratio = raw === null ? 1 : Number(raw);
  if (!/^\d*\.?\d+$/.test(raw ?? '1') || ratio > 1) throw new ConfigError(name, `expected a ratio from 0 to 1, got "${raw}"`);
  return ratio;
}

/**
 * OTEL_TRACES_EXPORTER as the SDKs read it: a comma-separated list of `otlp`, `console`, or `none`.
 * Null when unset: then whether an endpoint is set decides (src/core/config.ts).
 */
function parseExporters(raw: string | null, _known: Known, name: string): { otlp: boolean; console: boolean } | null {
  if (raw === null) return null;
  const names = raw.split(',').map((exporter) => exporter.trim());
  const unknown = names.filter((exporter) => !EXPORTERS.includes(exporter));
  if (unknown.length > 0 || (names.includes('none') && names.length > 1)) {
    throw new ConfigError(
      name,
      `expected otlp, console or both (comma-separated), or none alone, got "${raw}" (zipkin and jaeger are not built in: use OTLP)`,
    );
  }
  return { otlp: names.includes('otlp'), console: names.includes('console') };
}

/** TRACES_EXCLUDED_PATHS: comma-separated request paths that make no trace, or `none` to trace every path. */
function parseUntracedPaths(raw: string | null, _known: Known, name: string): string[] {
  if (raw === null) return DEFAULT_UNTRACED_PATHS;
  if (raw === 'none') return [];
  const paths = raw.split(',').map((entry) => entry.trim());
  const wrong = paths.filter((entry) => !/^\/[\x21-\x7e]*$/.test(entry));
  if (wrong.length > 0) throw new ConfigError(name, `expected paths such as /health,/ready (or none), got "${wrong.join('", "')}"`);
  return paths;
}

/** Groups in reading order: identity first, since whether this environment may run without a secret is the first thing start-up says. */
export const CONFIG_TABLE = {
  identity: group('Who may call', {
    actionSecret: secret({
      name: 'ACTION_SECRET',
      minLength: 16,
      doc: 'shared secret Hasura sends as `x-action-secret`; outside development, this or `JWT_SECRET` is required',
    }),
    jwt: custom({
      name: 'JWT_SECRET',
      shown: '(none)',
      accepts: "JSON, Hasura's form",
      parse: (raw, _known, name) => (raw === null ? null : parseJwtSecret(raw, name)),
      doc:
        "Hasura's `HASURA_GRAPHQL_JWT_SECRET` JSON: a `type` and `key` (shared secret, PEM, certificate or JWK) or a `jwk_url`, " +
        'with `audience`, `issuer`, claims fields, `allowed_skew`, `header` (see [JWT_SECRET](#jwt_secret))',
    }),
  }),
  process: group('The process', {
    nodeEnv: text({
      name: 'NODE_ENV',
      default: 'development',
      pattern: /^[A-Za-z0-9_.-]{1,64}$/,
      expected: 'a name such as production or development',
      accepts: 'a name (letters, digits, `_`, `.`, `-`)',
      doc: 'anything but `development` or `test` (`production`, `staging`, …) refuses dev mode and the embedded database, and hides GraphiQL',
    }),
    logLevel: oneOf({
      name: 'LOG_LEVEL',
      words: LOG_LEVELS,
      default: (known) => (known.nodeEnv() === 'test' ? 'silent' : 'info'),
      shown: '`info` (`silent` with `NODE_ENV=test`)',
      doc: 'the least severe level the log writes; `silent` writes nothing',
    }),
    runWorkers: flag({
      name: 'RUN_WORKERS',
      default: true,
      doc:
        'run the background loops (outbox relay, huddle cleanup, key expiry, budget lease expiry, retention, payment reconciler) ' +
        'inside the server; `npm run worker` runs them alone',
    }),
    webConcurrency: wholeNumber({
      name: 'WEB_CONCURRENCY',
      default: 1,
      min: 1,
      max: 64,
      doc: 'HTTP processes sharing the port (node:cluster)',
    }),
    httpHeartbeatTimeoutMs: wholeNumber({
      name: 'HTTP_HEARTBEAT_TIMEOUT_MS',
      default: 15_000,
      min: 1_000,
      max: 600_000,
      doc:
        'with `WEB_CONCURRENCY` > 1, an HTTP process beats to the primary every fifth of this; one not heard from for this long ' +
        '(frozen: SIGSTOP, a paused machine, a loop that never yields) is killed with SIGKILL and replaced ([all cores](#all-cores-web_concurrency))',
    }),
  }),
  database: group('The database', {
    url: custom({
      name: 'DATABASE_URL',
      shown: '(embedded)',
      accepts: '`postgres://…` URL',
      parse: parseDatabaseUrlVariable,
      doc:
        "`postgres://…` of an existing server, or libpq's multi-host form `postgres://u:p@db1:5432,db2:5432/app?target_session_attrs=read-write` " +
        '(`any`, `read-write` or `primary`: [failover](#failover-patroni-haproxy)); when unset an embedded PostgreSQL runs with data in `.data/` ' +
        '(development and tests only: required whenever `NODE_ENV` is not unset, `development` or `test`)',
    }),
    connectTimeoutMs: wholeNumber({
      name: 'DB_CONNECT_TIMEOUT_MS',
      default: 30_000,
      min: 0,
      max: 3_600_000,
      doc: 'how long start-up keeps trying to reach `DATABASE_URL` (one log line per attempt) before it stops',
    }),
    healthCheckIntervalMs: wholeNumber({
      name: 'DB_HEALTH_CHECK_INTERVAL_MS',
      default: 2_000,
      min: 100,
      max: 600_000,
      doc:
        'how often the server checks its database over a connection of its own (sooner when a connection stalls or a host fails); ' +
        '`/ready` answers from the last check; while it fails, a log line each time, and one when it is back',
    }),
    poolMax: wholeNumber({ name: 'DB_POOL_MAX', default: 10, min: 1, max: 1000, doc: 'connections in the pool' }),
    poolAcquireTimeoutMs: wholeNumber({
      name: 'DB_POOL_ACQUIRE_TIMEOUT_MS',
      default: 3_000,
      min: 1,
      max: 600_000,
      doc: 'wait for a free connection while every one is busy (and for an operation\'s turn) before answering `TRY_AGAIN` ("every connection was busy")',
    }),
    poolConnectTimeoutMs: wholeNumber({
      name: 'DB_POOL_CONNECT_TIMEOUT_MS',
      default: 3_000,
      min: 100,
      max: 600_000,
      doc:
        'how long one new connection to one host may take (TCP, TLS, authentication, the `target_session_attrs` check) ' +
        'before the next host is tried or the request answers `TRY_AGAIN` naming this variable',
    }),
    preparedStatements: flag({
      name: 'DB_PREPARED_STATEMENTS',
      default: true,
      doc:
        'run the hot statements as named prepared statements (parsed and planned once per connection); `false` behind a pooler in ' +
        'transaction mode that does not keep them (PgBouncer before 1.21, or later without `max_prepared_statements`)',
    }),
    lockTimeoutMs: wholeNumber({
      name: 'LOCK_TIMEOUT_MS',
      default: 2_000,
      min: 1,
      max: 600_000,
      doc: '`lock_timeout` of every transaction',
    }),
    statementTimeoutMs: wholeNumber({
      name: 'STATEMENT_TIMEOUT_MS',
      default: 5_000,
      min: 10,
      max: 600_000,
      doc: '`statement_timeout` of every transaction',
    }),
    idleInTransactionTimeoutMs: wholeNumber({
      name: 'IDLE_IN_TRANSACTION_TIMEOUT_MS',
      default: 10_000,
      min: 100,
      max: 600_000,
      doc: '`idle_in_transaction_session_timeout` of every transaction',
    }),
  }),
  requests: group("A request's budget", {
    deadlineMs: wholeNumber({
      name: 'REQUEST_DEADLINE_MS',
      default: 10_000,
      min: 100,
      max: 25_000,
      doc: "a request's whole budget, retries included (below Hasura's 30 s)",
    }),
    transactionMaxAttempts: wholeNumber({
      name: 'TRANSACTION_MAX_ATTEMPTS',
      default: 8,
      min: 1,
      max: 100,
      doc: 'attempts of a transaction on 40001, 40P01, 55P03',
    }),
  }),
  server: group('The HTTP server', {
    host: text({
      name: 'HOST',
      // Dev mode trusts x-hasura-* headers from anyone who can connect: only this machine may.
      default: (known) => (known.devMode() ? '127.0.0.1' : '0.0.0.0'),
      shown: '`127.0.0.1` in dev mode, else `0.0.0.0`',
      pattern: /^[A-Za-z0-9.:-]{1,253}$/,
      expected: 'an address or host name to bind to',
      accepts: 'an IPv4 or IPv6 address or a host name',
      doc: 'the interface the HTTP server binds to',
    }),
    port: wholeNumber({ name: 'PORT', default: 4000, min: 0, max: 65_535, doc: 'HTTP port' }),
    maxBodyBytes: wholeNumber({
      name: 'MAX_BODY_BYTES',
      default: 100_000,
      min: 1_000,
      max: 10_000_000,
      doc: 'larger request bodies are refused with 413',
    }),
    requestTimeoutMs: wholeNumber({
      name: 'HTTP_REQUEST_TIMEOUT_MS',
      default: 30_000,
      min: 1_000,
      max: 600_000,
      doc: 'the whole request (headers and body) must arrive within this; slower sockets get 408',
    }),
    maxConnections: wholeNumber({
      name: 'HTTP_MAX_CONNECTIONS',
      default: 10_000,
      min: 1,
      max: 1_000_000,
      doc: 'open sockets; more are closed at once',
    }),
    keepAliveTimeoutMs: wholeNumber({
      name: 'HTTP_KEEP_ALIVE_TIMEOUT_MS',
      default: 65_000,
      min: 1_000,
      max: 3_600_000,
      doc:
        'how long an idle keep-alive connection stays open (announced as `Keep-Alive: timeout=65`); keep it above the idle timeout ' +
        'of the proxy in front ([keep-alive](#keep-alive-and-proxies))',
    }),
  }),
  embeddedPostgres: group('The embedded PostgreSQL (development and tests)', {
    port: portOrAny({
      name: 'EMBEDDED_PG_PORT',
      default: 54_329,
      doc: 'port of the embedded PostgreSQL (loopback only); 0 picks an unused one at each start (`npm run -s db:url` finds it while it runs)',
    }),
    dataDir: folder({
      name: 'EMBEDDED_PG_DATA_DIR',
      shown: '`.data/postgres`',
      doc: 'data folder of the embedded PostgreSQL; one running server per folder (a second `npm start` on it stops with a message naming the first)',
    }),
    sharedDir: folder({
      name: 'EMBEDDED_PG_SHARED_DIR',
      shown: '`/var/lib/mutation-backend`',
      doc:
        'as root: PostgreSQL runs as the `postgres` user; where that user cannot enter the project (a clone under `/root`, a `mktemp -d` folder), ' +
        'a copy of the binaries per version and the data folder (linked from `EMBEDDED_PG_DATA_DIR`) live here',
    }),
  }),
  coupons: group('Coupons', {
    businessTimeZone: custom({
      name: 'BUSINESS_TIME_ZONE',
      shown: '`Asia/Tokyo`',
      accepts: 'an IANA time zone',
      parse: parseTimeZone,
      doc: "the time zone of business calendar months (a member's monthly cap)",
    }),
    budgetLeaseTtlMs: wholeNumber({
      name: 'BUDGET_LEASE_TTL_MS',
      default: 10_000,
      min: 300,
      max: 3_600_000,
      doc:
        'how long a budget lease of a campaign with `budgetLeaseCoupons` lives unless its process renews it (every third of it); ' +
        "after that any process's refill and the background loops (a pass every third of it) give it back to the budget row",
    }),
    issueBatchMax: wholeNumber({
      name: 'COUPON_ISSUE_BATCH_MAX',
      default: 32,
      min: 1,
      max: 1000,
      doc:
        'the most issueCoupon requests of one tenant that a server process runs as one statement and one commit; 1 is no batching. ' +
        'A request that finds fewer than two statements of its tenant in flight in its process runs at once, alone; one that finds two waits for ' +
        'the first to end and then runs with the others that waited, four or more at a time (docs/design.md §4, batched issues). ' +
        'Under a sale (hundreds of issues a second for one tenant per process) that halves the PostgreSQL CPU per coupon; ' +
        'while a tenant has fewer than two issues at a time in a process nothing waits (docs/benchmarks.md, batched issues)',
    }),
  }),
  idempotency: group('Idempotency keys', {
    ttlHours: wholeNumber({
      name: 'IDEMPOTENCY_TTL_HOURS',
      default: 24,
      min: 1,
      max: 24 * 365,
      doc: 'how long a stored response is replayed',
    }),
    cleanupIntervalMs: wholeNumber({
      name: 'IDEMPOTENCY_CLEANUP_INTERVAL_MS',
      default: 60_000,
      min: 10,
      max: 86_400_000,
      doc: 'pause between passes deleting expired keys',
    }),
  }),
  outbox: group('The outbox relay', {
    webhookUrl: httpUrl({ name: 'NOTIFY_WEBHOOK_URL', shown: '(none: log)', doc: 'where the relay POSTs events' }),
    webhookTimeoutMs: wholeNumber({
      name: 'NOTIFY_WEBHOOK_TIMEOUT_MS',
      default: 5_000,
      min: 100,
      max: 120_000,
      doc: "one delivery's time limit",
    }),
    batchSize: wholeNumber({ name: 'OUTBOX_BATCH_SIZE', default: 100, min: 1, max: 10_000, doc: 'events claimed per pass' }),
    pollIntervalMs: wholeNumber({
      name: 'OUTBOX_POLL_INTERVAL_MS',
      default: 500,
      min: 10,
      max: 600_000,
      doc: 'pause between passes when idle',
    }),
    leaseMs: wholeNumber({
      name: 'OUTBOX_LEASE_MS',
      default: 30_000,
      min: 100,
      max: 3_600_000,
      doc: 'how long a claim holds its events before another relay may take them',
    }),
    retryForMs: duration({
      name: 'OUTBOX_RETRY_FOR',
      default: 72 * 3_600_000,
      min: 1_000,
      max: 30 * 86_400_000,
      doc: 'how long an event is retried, from when it was written (or given back by `npm run outbox:requeue`), before it is marked dead',
    }),
    maxAttempts: optionalWholeNumber({
      name: 'OUTBOX_MAX_ATTEMPTS',
      min: 1,
      max: 1_000_000,
      doc: 'when set, an event is also marked dead after this many deliveries',
    }),
    retryBaseDelayMs: wholeNumber({
      name: 'OUTBOX_RETRY_BASE_MS',
      default: 1_000,
      min: 1,
      max: 3_600_000,
      doc: 'the smallest full-jitter backoff between attempts, doubled on each attempt up to `OUTBOX_RETRY_MAX_MS`',
    }),
    retryMaxDelayMs: wholeNumber({
      name: 'OUTBOX_RETRY_MAX_MS',
      default: 300_000,
      min: 'OUTBOX_RETRY_BASE_MS',
      max: 86_400_000,
      doc:
        'the largest backoff; after the receiver recovers, the first delivery succeeds within it (at once when new events arrive) ' +
        'and each delivery then brings a waiting retry forward ([the outbox](#the-outbox-through-a-long-outage))',
    }),
  }),
  payments: group('Payments', {
    secretKey: custom({
      name: 'STRIPE_SECRET_KEY',
      shown: '(none)',
      accepts: '`sk_live_…`, `sk_test_…`, `rk_live_…`, `rk_test_…`',
      parse: parseStripeSecretKey,
      doc:
        "Stripe's secret or restricted key for checkout's payments ([payments](#payments)); without it a development server uses " +
        'a simulated provider (`pm_card_visa` pays, `pm_card_chargeDeclined` is declined) and says so at start-up, and any other server ' +
        'says so at start-up and answers checkout `PAYMENTS_UNAVAILABLE`',
    }),
    apiUrl: custom({
      name: 'STRIPE_API_URL',
      shown: `\`${STRIPE_API_URL}\``,
      accepts: '`scheme://host[:port]`, no path',
      parse: parseStripeApiUrl,
      doc: "where Stripe's API is: tests point it at a stub of their own",
    }),
    timeoutMs: wholeNumber({
      name: 'PAYMENTS_TIMEOUT_MS',
      default: fittingPaymentTimeout,
      shown: '5000 (at most half of `REQUEST_DEADLINE_MS`)',
      min: PAYMENT_CALL_MIN_MS,
      max: 60_000,
      doc:
        'one call to the payment provider; no answer by then is `PENDING` (not an error) and the reconciler settles it. ' +
        `At least ${PAYMENT_RECORD_MARGIN_MS} below \`REQUEST_DEADLINE_MS\`, so that the outcome is recorded in the same request (refused at start-up otherwise)`,
    }),
    reconcileAfterMs: wholeNumber({
      name: 'PAYMENTS_RECONCILE_AFTER_MS',
      default: 60_000,
      min: 100,
      max: 3_600_000,
      doc:
        'a payment whose outcome is not known this long after its order is resent by the reconciler (the same request, the same `Idempotency-Key`); ' +
        'each later resend waits twice as long, at most an hour',
    }),
    reconcileIntervalMs: wholeNumber({
      name: 'PAYMENTS_RECONCILE_INTERVAL_MS',
      default: 5_000,
      min: 10,
      max: 600_000,
      doc: 'pause between reconciler passes when nothing is due',
    }),
    reconcileForMs: duration({
      name: 'PAYMENTS_RECONCILE_FOR',
      default: RECONCILE_FOR_MAX_MS,
      min: 1_000,
      max: RECONCILE_FOR_MAX_MS,
      doc:
        'how long after its order a payment is resent; after that it is reported (log, `payments_unsettled`, `npm run reconcile`), never resent: ' +
        'Stripe keeps an idempotency key for 24 hours, and a resend after it could charge again',
    }),
    maxWaiting: wholeNumber({
      name: 'PAYMENTS_MAX_WAITING',
      default: 256,
      min: 1,
      max: 100_000,
      doc:
        'checkouts of one HTTP process waiting on the payment provider at once (they hold no turn and no connection meanwhile); ' +
        'more are answered `TRY_AGAIN` (`reason: payments busy`) before anything is written',
    }),
  }),
  huddles: group('Huddles', {
    cleanupIntervalMs: wholeNumber({
      name: 'HUDDLE_CLEANUP_INTERVAL_MS',
      default: 10_000,
      min: 10,
      max: 3_600_000,
      doc: 'pause between stale-huddle cleanup passes',
    }),
    staleAfterMs: wholeNumber({
      name: 'HUDDLE_STALE_AFTER_MS',
      default: 30_000,
      min: 100,
      max: 86_400_000,
      doc: 'a member whose last heartbeat is older is removed by cleanup',
    }),
    cleanupBatchSize: wholeNumber({
      name: 'HUDDLE_CLEANUP_BATCH_SIZE',
      default: 100,
      min: 1,
      max: 10_000,
      doc: 'objectives one cleanup transaction looks at',
    }),
  }),
  retention: group('Retention', {
    outboxSentHours: wholeNumber({
      name: 'OUTBOX_RETENTION_HOURS',
      default: 168,
      min: 0,
      max: 87_600,
      doc: 'sent events are deleted once they were sent this long ago (pending and dead ones never)',
    }),
    huddleEndedHours: wholeNumber({
      name: 'HUDDLE_RETENTION_HOURS',
      default: 168,
      min: 0,
      max: 87_600,
      doc: 'ended huddle sessions and their participants are deleted once they ended this long ago',
    }),
    intervalMs: wholeNumber({
      name: 'RETENTION_INTERVAL_MS',
      default: 60_000,
      min: 10,
      max: 86_400_000,
      doc: 'pause between retention passes (at once while a batch came back full)',
    }),
    batchSize: wholeNumber({
      name: 'RETENTION_BATCH_SIZE',
      default: 1_000,
      min: 1,
      max: 100_000,
      doc: 'rows (sessions, with their participants) one retention statement deletes ([table growth](#table-growth-and-retention))',
    }),
  }),
  migrations: group('Migrations at start-up', {
    lockTimeoutMs: wholeNumber({
      name: 'MIGRATION_LOCK_TIMEOUT_MS',
      default: MIGRATION_DEFAULTS.lockTimeoutMs,
      min: 10,
      max: 600_000,
      doc: "`lock_timeout` of every migration statement: the longest requests queue behind a migration's lock ([migrations](#migrations-under-traffic))",
    }),
    statementTimeoutMs: wholeNumber({
      name: 'MIGRATION_STATEMENT_TIMEOUT_MS',
      default: MIGRATION_DEFAULTS.statementTimeoutMs,
      min: 100,
      max: 86_400_000,
      doc: '`statement_timeout` of every migration statement',
    }),
    retryForMs: wholeNumber({
      name: 'MIGRATION_RETRY_FOR_MS',
      default: MIGRATION_DEFAULTS.retryForMs,
      min: 0,
      max: 3_600_000,
      doc: 'how long a migration whose locks timed out is tried again (full jitter) before start-up stops, naming the sessions it waited for',
    }),
    lockWaitMs: wholeNumber({
      name: 'MIGRATION_LOCK_WAIT_MS',
      default: MIGRATION_DEFAULTS.lockWaitMs,
      min: 1,
      max: 3_600_000,
      doc: 'how long start-up waits for another process that holds the migration lock',
    }),
  }),
  shutdown: group('Stopping', {
    graceMs: wholeNumber({
      name: 'SHUTDOWN_GRACE_MS',
      default: 5_000,
      min: 0,
      max: 600_000,
      doc:
        'after SIGTERM, `/ready` answers 503 while the server still accepts and answers for this long, so that a load balancer ' +
        'stops sending first ([deploys](#deploys-without-a-dropped-request))',
    }),
    drainTimeoutMs: wholeNumber({
      name: 'HTTP_DRAIN_TIMEOUT_MS',
      default: 15_000,
      min: 0,
      max: 600_000,
      doc:
        'then, with the listener closed, how long requests in flight get to end by themselves (idle keep-alive connections are closed ' +
        'with the listener when the whole server stops); what is still open is closed (longer than `REQUEST_DEADLINE_MS`, so a request ' +
        'in flight always ends by itself)',
    }),
  }),
  edge: group('The public edge', {
    maxQueryDepth: wholeNumber({
      name: 'MAX_QUERY_DEPTH',
      default: 10,
      min: 1,
      max: 100,
      doc: 'nesting of selections (inline fragments count; introspection exempt)',
    }),
    maxAliases: wholeNumber({
      name: 'MAX_ALIASES',
      default: 15,
      min: 0,
      max: 1_000,
      doc: 'aliases in one operation, root fields included',
    }),
    maxQueryTokens: wholeNumber({
      name: 'MAX_QUERY_TOKENS',
      default: 1_000,
      min: 50,
      max: 100_000,
      doc: 'lexical tokens the parser reads before it refuses a document',
    }),
    maxQueryCost: wholeNumber({
      name: 'MAX_QUERY_COST',
      default: 5_000,
      min: 1,
      max: 10_000_000,
      doc: 'cost of one operation: a field costs 1, a list its `first` (or its default) times its selection',
    }),
    introspection: flag({
      name: 'GRAPHQL_INTROSPECTION',
      default: (known) => known.development(),
      shown: '`true` in development, else `false`',
      doc: 'answer introspection; when off, error messages carry no "Did you mean" suggestions',
    }),
    corsOrigins: custom({
      name: 'CORS_ORIGINS',
      shown: '`*` in development, none otherwise',
      accepts: 'origins (`scheme://host[:port]`) separated by commas, or `*`',
      parse: parseOrigins,
      doc: 'origins allowed with credentials; `*` allows any origin without credentials',
    }),
    metricsToken: secret({
      name: 'METRICS_TOKEN',
      minLength: 16,
      doc:
        'when set, `/metrics` needs `Authorization: Bearer <token>`; unset outside development, the server starts but warns at start-up ' +
        'and its banner marks `/metrics` open',
    }),
    trustedDocumentsPath: file({
      name: 'TRUSTED_DOCUMENTS',
      doc:
        'path of a persisted-documents manifest (hash -> document, the hash bare or as `sha256:<hash>`): only those documents run, ' +
        'for every role but the platform operator',
    }),
    maxInFlight: wholeNumber({
      name: 'MAX_IN_FLIGHT',
      default: (known) => known.number('DB_POOL_MAX'),
      shown: '`DB_POOL_MAX`',
      min: 1,
      max: 10_000,
      doc: 'GraphQL operations executing at once; each holds at most one connection at a time',
    }),
    tenantQueueMax: wholeNumber({
      name: 'TENANT_QUEUE_MAX',
      default: 256,
      min: 0,
      max: 100_000,
      doc:
        "operations of one tenant waiting for a turn; beyond it the member holding most of the tenant's turns (executing and waiting) " +
        'is answered `TRY_AGAIN` first ([fairness](design.md#8-the-public-edge))',
    }),
    anonymous: {
      maxInFlight: wholeNumber({
        name: 'ANONYMOUS_MAX_IN_FLIGHT',
        default: 1,
        min: 1,
        max: 10_000,
        doc: 'operations of callers without a session executing at once, all such callers together',
      }),
      queueMax: wholeNumber({
        name: 'ANONYMOUS_QUEUE_MAX',
        default: 16,
        min: 0,
        max: 100_000,
        doc: 'operations of callers without a session waiting for a turn, together; beyond it the client address holding most is answered `TRY_AGAIN` first',
      }),
      rate: wholeNumber({
        name: 'ANONYMOUS_RATE',
        default: 2,
        min: 1,
        max: 1_000_000,
        doc:
          "operations per second one client address may start without a session; beyond it an operation waits for its address's next token " +
          'in the anonymous waiting room (`ANONYMOUS_QUEUE_MAX`), and is answered `TRY_AGAIN` with `Retry-After` when the room is full or the ' +
          'token would come after `DB_POOL_ACQUIRE_TIMEOUT_MS`, before its document is read. Per HTTP process: with `WEB_CONCURRENCY=N` ' +
          'an address may start up to N times as many',
      }),
      burst: wholeNumber({
        name: 'ANONYMOUS_BURST',
        default: 2,
        min: 1,
        max: 1_000_000,
        doc: 'operations one client address may start at once without a session (the bucket of `ANONYMOUS_RATE`)',
      }),
    },
    memberWriteRate: wholeNumber({
      name: 'MEMBER_WRITE_RATE',
      default: 50,
      min: 1,
      max: 1_000_000,
      doc:
        "mutations (root fields) one session of a tenant (a member, or the tenant's admin) may start per second; more are answered " +
        '`TRY_AGAIN` with `Retry-After` before anything is written. Per HTTP process: with `WEB_CONCURRENCY=N` a member may write up to ' +
        'N times as fast. No scenario of the load tool or the benchmark comes near it: their busiest member writes about 25 a second ' +
        'at 2,000 requests a second',
    }),
    memberWriteBurst: wholeNumber({
      name: 'MEMBER_WRITE_BURST',
      default: 200,
      min: 1,
      max: 1_000_000,
      doc: 'mutations one session of a tenant may start at once (the bucket of `MEMBER_WRITE_RATE`)',
    }),
    trustProxy: custom({
      name: 'TRUST_PROXY',
      shown: "(none: the socket's peer)",
      accepts: 'addresses, CIDR ranges (`10.0.0.0/8`) or `loopback`, `linklocal`, `uniquelocal`, separated by commas',
      parse: parseTrustProxy,
      doc:
        'the proxies whose `X-Forwarded-For` is believed for the client address of the limits above. The client is the nearest address ' +
        'in `X-Forwarded-For` that none of them vouches for',
    }),
    maxSelections: wholeNumber({
      name: 'MAX_SELECTIONS',
      default: 200,
      min: 10,
      max: 100_000,
      doc: 'fields, fragment spreads and inline fragments in one document; checked before validation, whose cost grows with their square',
    }),
    documentCacheBytes: wholeNumber({
      name: 'DOCUMENT_CACHE_BYTES',
      default: 16 * 1024 * 1024,
      shown: '16777216 (16 MiB)',
      min: 0,
      max: 4 * 1024 * 1024 * 1024,
      doc: 'estimated bytes the parsed documents and parse errors kept for reuse may hold; the least recently used go first ([memory](#memory))',
    }),
  }),
  tracing: group('Traces (OpenTelemetry)', {
    otlpEndpoint: httpUrl({
      name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
      shown: '(none: tracing off unless `OTEL_TRACES_EXPORTER` names an exporter)',
      doc: 'base URL of an OTLP/HTTP collector; spans go to its `/v1/traces`',
    }),
    otlpTracesEndpoint: httpUrl({
      name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      doc: 'the traces URL itself; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
    }),
    protocol: oneOf({
      name: 'OTEL_EXPORTER_OTLP_PROTOCOL',
      words: ['http/protobuf', 'http/json'],
      default: 'http/protobuf',
      expected: 'http/protobuf or http/json (OTLP over HTTP)',
      doc: 'the encoding of OTLP over HTTP',
    }),
    sampler: oneOf({
      name: 'OTEL_TRACES_SAMPLER',
      words: SAMPLERS,
      default: 'parentbased_always_on',
      doc: 'which requests make a trace',
    }),
    samplerRatio: custom({
      name: 'OTEL_TRACES_SAMPLER_ARG',
      shown: '1',
      accepts: 'a ratio, 0 to 1',
      parse: parseSamplerRatio,
      doc: 'the ratio of the `traceidratio` samplers',
    }),
    serviceName: text({
      name: 'OTEL_SERVICE_NAME',
      default: 'mutation-backend',
      pattern: /^[\x21-\x7e]{1,255}$/,
      expected: 'a name without spaces',
      accepts: 'a name without spaces',
      doc: 'the `service.name` of every span',
    }),
    exporters: custom({
      name: 'OTEL_TRACES_EXPORTER',
      shown: '`otlp` when an endpoint is set, else none',
      accepts: '`otlp`, `console`, both comma-separated, or `none`',
      parse: parseExporters,
      doc:
        'where spans go: `console` prints every span on stdout as it ends (a first look without a collector); `otlp` with no endpoint ' +
        'sends to `http://localhost:4318/v1/traces`',
    }),
    excludedPaths: custom({
      name: 'TRACES_EXCLUDED_PATHS',
      shown: `\`${DEFAULT_UNTRACED_PATHS.join(',')}\``,
      accepts: 'paths separated by commas, or `none`',
      parse: parseUntracedPaths,
      doc: 'request paths that make no trace, nor do their queries (probes and scrapes would be a trace every few seconds); `none` traces every path',
    }),
    scheduleDelayMs: wholeNumber({
      name: 'OTEL_BSP_SCHEDULE_DELAY',
      default: 5_000,
      min: 0,
      max: 600_000,
      doc: 'milliseconds the batch processor waits before it sends spans',
    }),
    statementText: oneOf({
      name: 'TRACES_STATEMENT_TEXT',
      words: ['unprepared', 'all'],
      default: 'unprepared',
      expected: 'unprepared or all',
      doc:
        'which statement spans carry `db.query.text`: `unprepared` (every statement but the prepared ones of the hot path, which their ' +
        "span's name and `db.query.summary` identify: their text is several kilobytes, the same on every span, and encoding it was the " +
        'costliest part of tracing a request), or `all`',
    }),
  }),
};
