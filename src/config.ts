import { statSync } from 'node:fs';
import path from 'node:path';
import proxyaddr from 'proxy-addr';

/**
 * Environment -> typed configuration. Every value is checked once at start-up; a wrong value stops
 * the process with a message that names the variable, so a typo never surfaces later as a hang or
 * a silent default.
 */

import { ConfigError } from './config-error.js';
import { isHttpUrl } from './http-url.js';
import { DatabaseUrlError, parseDatabaseUrl } from './database-url.js';
import { parseJwtSecret, type JwtConfig } from './jwt-config.js';

export { ConfigError, type JwtConfig };

export interface AppConfig {
  process: ProcessConfig;
  server: ServerConfig;
  database: DatabaseConfig;
  embeddedPostgres: EmbeddedPostgresConfig;
  requests: RequestConfig;
  identity: IdentityConfig;
  coupons: CouponConfig;
  idempotency: IdempotencyConfig;
  outbox: OutboxConfig;
  payments: PaymentsConfig;
  huddles: HuddleConfig;
  retention: RetentionConfig;
  migrations: MigrationConfig;
  shutdown: ShutdownConfig;
  edge: EdgeConfig;
  tracing: TracingConfig;
}

/** How this process runs: its environment, its log, what it runs besides HTTP. */
export interface ProcessConfig {
  /** As set; unset is `development`. */
  nodeEnv: string;
  /** NODE_ENV unset, `development` or `test`: the only environments where dev mode may run. */
  development: boolean;
  logLevel: string;
  /** Run the outbox relay and the other background loops inside this process. */
  runWorkers: boolean;
  /** HTTP worker processes (node:cluster) sharing the port; 1 runs everything in one process. */
  webConcurrency: number;
  /** With WEB_CONCURRENCY > 1: an HTTP process whose heartbeat the primary has not heard for this long is killed and replaced. */
  httpHeartbeatTimeoutMs: number;
}

/** The HTTP server: where it listens, and what one connection and one request may take. */
export interface ServerConfig {
  /** The interface the HTTP server binds to. */
  host: string;
  port: number;
  maxBodyBytes: number;
  requestTimeoutMs: number;
  maxConnections: number;
  /** How long an idle keep-alive connection stays open; above any proxy's idle timeout in front, so the proxy closes first. */
  keepAliveTimeoutMs: number;
}

/** The database: where it is, the pool that reaches it, and the limits every transaction runs under. */
export interface DatabaseConfig {
  /** Null: the embedded PostgreSQL (development and tests only). */
  url: string | null;
  /** How long start-up keeps trying to reach DATABASE_URL before it gives up. */
  connectTimeoutMs: number;
  /** Pause between checks that the database answers (a line in the log while it does not). */
  healthCheckIntervalMs: number;
  poolMax: number;
  /** The wait for a free connection while every one is busy. */
  poolAcquireTimeoutMs: number;
  /** Opening one new connection on one host: TCP, TLS, authentication, the target_session_attrs check. */
  poolConnectTimeoutMs: number;
  /** Named prepared statements for the hot path; off behind a pooler that cannot keep them (PgBouncer < 1.21 in transaction mode). */
  preparedStatements: boolean;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** The embedded PostgreSQL of development and tests (used when DATABASE_URL is unset). */
export interface EmbeddedPostgresConfig {
  port: number;
  /** Null: .data/postgres in the project. */
  dataDir: string | null;
  /** As root, where the embedded binaries and data go when the postgres user cannot reach the project; null: the default. */
  sharedDir: string | null;
}

/** A request's budget: its deadline, retries included, and how often its transaction is tried within it. */
export interface RequestConfig {
  deadlineMs: number;
  transactionMaxAttempts: number;
}

/** How callers prove who they are; neither set: dev mode (`isDevMode`). */
export interface IdentityConfig {
  actionSecret: string | null;
  jwt: JwtConfig | null;
}

export interface CouponConfig {
  /** The IANA time zone of business calendar months (a member's monthly cap). */
  businessTimeZone: string;
  /** How long a budget lease lives unless its process renews it. */
  budgetLeaseTtlMs: number;
  /** The most issues on one campaign a process runs as one statement (coalescer.ts); 1 (the default): each issue is a statement of its own. */
  issueBatchMax: number;
}

export interface IdempotencyConfig {
  ttlHours: number;
  cleanupIntervalMs: number;
}

export type Sampler =
  'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

/** OpenTelemetry tracing, from the standard OTEL_* variables (docs/operations.md). */
export interface TracingConfig {
  /** Where spans go (OTLP over HTTP); null: no OTLP export. Tracing is off and costs nothing when neither this nor `console`. */
  tracesEndpoint: string | null;
  /** Print every span on stdout (OTEL_TRACES_EXPORTER=console): a first look without a collector. */
  console: boolean;
  /** Request paths that make no trace (probes and scrapes), nor do their queries. */
  excludedPaths: string[];
  protocol: 'http/protobuf' | 'http/json';
  serviceName: string;
  sampler: Sampler;
  /** The ratio of the traceidratio samplers, 0 to 1. */
  samplerRatio: number;
  /** How long the batch processor waits before it sends (OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
  /** Whether a prepared statement's span carries its text too (TRACES_STATEMENT_TEXT=all), not only its name. */
  preparedStatementText: boolean;
}

/** What the public endpoint accepts from anyone on the internet (docs/design.md §8). */
export interface EdgeConfig {
  maxQueryDepth: number;
  /** Aliases in one document, root fields included. */
  maxAliases: number;
  /** Lexical tokens the parser reads before it gives up. */
  maxQueryTokens: number;
  /** A field costs 1, a list its `first` (or its declared maximum) times its selection. */
  maxQueryCost: number;
  introspection: boolean;
  /** Origins allowed with credentials; '*' alone: any origin, without credentials. */
  corsOrigins: string[];
  metricsToken: string | null;
  trustedDocumentsPath: string | null;
  /** GraphQL operations executing at once; each holds at most one pool connection at a time. */
  maxInFlight: number;
  /** Operations of one tenant waiting for a turn; beyond it the tenant's longest line is shed with TRY_AGAIN. */
  tenantQueueMax: number;
  /** The share of callers without a session. */
  anonymous: { maxInFlight: number; queueMax: number; rate: number; burst: number };
  /** Mutations (root fields) a member may start per second, and at once, in one process. */
  memberWriteRate: number;
  memberWriteBurst: number;
  /** The proxies whose X-Forwarded-For is believed (addresses, CIDR ranges, loopback/linklocal/uniquelocal); empty: none. */
  trustProxy: string[];
  /** Fields, fragment spreads and inline fragments in one document. */
  maxSelections: number;
  /** Bytes (estimated) the parsed documents and parse errors kept for reuse may hold. */
  documentCacheBytes: number;
}

/** Stopping without a dropped request (docs/operations.md, "Deploys"). */
export interface ShutdownConfig {
  /** After SIGTERM: /ready fails while the server still accepts, so a load balancer stops sending first. */
  graceMs: number;
  /** Then, with the listener closed: how long requests in flight and idle keep-alive connections get to end by themselves. */
  drainTimeoutMs: number;
}

/** What start-up migrations may do to a database that serves traffic (docs/operations.md, "Migrations"). */
export interface MigrationConfig {
  /** lock_timeout of every migration statement: the longest the hot path queues behind its DDL. */
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  /** How long a migration whose locks time out is tried again (backoff with jitter) before start-up fails. */
  retryForMs: number;
  /** How long start-up waits for another process that holds the migration lock. */
  lockWaitMs: number;
}

/** Rows deleted by the background loops once they are this old. */
export interface RetentionConfig {
  /** Sent outbox events (pending and dead ones are never deleted). */
  outboxSentHours: number;
  /** Ended huddle sessions and their participants. */
  huddleEndedHours: number;
  intervalMs: number;
  /** Rows per delete statement: a small batch keeps each statement short. */
  batchSize: number;
}

export interface HuddleConfig {
  cleanupIntervalMs: number;
  staleAfterMs: number;
  /** Objectives one cleanup transaction looks at. */
  cleanupBatchSize: number;
}

export interface OutboxConfig {
  webhookUrl: string | null;
  webhookTimeoutMs: number;
  batchSize: number;
  pollIntervalMs: number;
  leaseMs: number;
  /** How long an event is retried, from when it was written (or given back): then it is dead. */
  retryForMs: number;
  /** null: no limit by count, only the time budget. */
  maxAttempts: number | null;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
}

/** The payment provider of checkout (docs/design.md §11): Stripe's PaymentIntents, or a simulated one in development. */
export interface PaymentsConfig {
  /** STRIPE_SECRET_KEY; null: the simulated provider in development, checkout refused elsewhere. */
  secretKey: string | null;
  /** Where Stripe's API is (tests point it at a stub of their own). */
  apiUrl: string;
  /** One provider call's limit; below the request's deadline, so that the second transaction has time. */
  timeoutMs: number;
  /** A payment not known this long is resolved by the reconciler. */
  reconcileAfterMs: number;
  /** Pause between reconciler passes when nothing is due. */
  reconcileIntervalMs: number;
  /** How long the reconciler resends one payment; below the 24 h Stripe keeps an idempotency key. */
  reconcileForMs: number;
  /** Checkouts of one process waiting on the provider at once; more are TRY_AGAIN before anything is written. */
  maxWaiting: number;
}

type Env = Record<string, string | undefined>;

function readString(env: Env, name: string): string | null {
  const value = env[name];
  if (value === undefined || value.trim() === '') return null;
  return value.trim();
}

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = readString(env, name);
  if (raw === null) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `expected a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) {
    throw new ConfigError(name, `expected a number from ${min} to ${max}, got ${value}`);
  }
  return value;
}

function readBoolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = readString(env, name);
  if (raw === null) return fallback;
  if (/^(true|1|yes|on)$/i.test(raw)) return true;
  if (/^(false|0|no|off)$/i.test(raw)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
}

function readHttpUrl(env: Env, name: string): string | null {
  const raw = readString(env, name);
  if (raw === null || isHttpUrl(raw)) return raw;
  throw new ConfigError(name, `expected an http:// or https:// URL, got "${raw}"`);
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration with its unit (90s, 30m, 72h, 3d) in milliseconds; null when it is not one. */
export function parseDuration(raw: string): number | null {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw.trim());
  return match ? Number(match[1]) * DURATION_UNITS_MS[match[2]!]! : null;
}

/** A duration with its unit: a bare number would leave the unit to guess. */
function readDuration(env: Env, name: string, fallbackMs: number, minMs: number, maxMs: number): number {
  const raw = readString(env, name);
  if (raw === null) return fallbackMs;
  const ms = parseDuration(raw);
  if (ms === null) throw new ConfigError(name, `expected a duration such as 72h, 30m or 90s, got "${raw}"`);
  if (ms < minMs || ms > maxMs) throw new ConfigError(name, `expected from ${minMs / 1000} s to ${maxMs / 3_600_000} h, got ${raw}`);
  return ms;
}

/** A whole number, or unset for "no limit". */
function readOptionalInt(env: Env, name: string, min: number, max: number): number | null {
  return readString(env, name) === null ? null : readInt(env, name, min, min, max);
}

function readOutbox(env: Env): OutboxConfig {
  const retryBaseDelayMs = readInt(env, 'OUTBOX_RETRY_BASE_MS', 1_000, 1, 3_600_000);
  return {
    webhookUrl: readHttpUrl(env, 'NOTIFY_WEBHOOK_URL'),
    webhookTimeoutMs: readInt(env, 'NOTIFY_WEBHOOK_TIMEOUT_MS', 5_000, 100, 120_000),
    batchSize: readInt(env, 'OUTBOX_BATCH_SIZE', 100, 1, 10_000),
    pollIntervalMs: readInt(env, 'OUTBOX_POLL_INTERVAL_MS', 500, 10, 600_000),
    leaseMs: readInt(env, 'OUTBOX_LEASE_MS', 30_000, 100, 3_600_000),
    retryForMs: readDuration(env, 'OUTBOX_RETRY_FOR', 72 * 3_600_000, 1_000, 30 * 86_400_000),
    maxAttempts: readOptionalInt(env, 'OUTBOX_MAX_ATTEMPTS', 1, 1_000_000),
    retryBaseDelayMs,
    retryMaxDelayMs: readInt(env, 'OUTBOX_RETRY_MAX_MS', 300_000, retryBaseDelayMs, 86_400_000),
  };
}

/** Stripe's API. */
export const STRIPE_API_URL = 'https://api.stripe.com';

/**
 * Stripe keeps an idempotency key for at least 24 hours, then may prune it: a resend after that
 * could charge again. The reconciler stops resending an hour before.
 */
export const STRIPE_KEY_KEPT_MS = 24 * 3_600_000;
const RECONCILE_FOR_MAX_MS = STRIPE_KEY_KEPT_MS - 3_600_000;

/** STRIPE_API_URL: a scheme, a host and a port; the client adds Stripe's paths (/v1/…) itself. */
function readStripeApiUrl(env: Env): string {
  const raw = readHttpUrl(env, 'STRIPE_API_URL');
  if (raw === null) return STRIPE_API_URL;
  const url = new URL(raw);
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError('STRIPE_API_URL', `expected scheme://host[:port] with no path, query or credentials, got "${raw}"`);
  }
  return url.origin;
}

/** Transaction 2 needs this much of a checkout's deadline after the call; the call is given the rest, up to PAYMENTS_TIMEOUT_MS. */
export const PAYMENT_RECORD_MARGIN_MS = 1_000;
/** Less than this left for the call: it is not sent, and the reconciler sends it. */
export const PAYMENT_CALL_MIN_MS = 200;

function readPayments(env: Env, deadlineMs: number): PaymentsConfig {
  const secretKey = readString(env, 'STRIPE_SECRET_KEY');
  if (secretKey !== null && !/^(sk|rk)_(test|live)_[A-Za-z0-9_]{1,240}$/.test(secretKey)) {
    // The value itself never goes into a message: it is a secret.
    throw new ConfigError('STRIPE_SECRET_KEY', 'expected a Stripe secret or restricted key (sk_live_…, sk_test_…, rk_live_…, rk_test_…)');
  }
  const fitting = Math.min(5_000, Math.floor(deadlineMs / 2), deadlineMs - PAYMENT_RECORD_MARGIN_MS);
  const timeoutMs = readInt(env, 'PAYMENTS_TIMEOUT_MS', Math.max(fitting, PAYMENT_CALL_MIN_MS), PAYMENT_CALL_MIN_MS, 60_000);
  // A call that does not fit would never be sent by a request (too little of its deadline left):
  // only the reconciler would charge, a minute later. Refused where it was asked for: an explicit
  // timeout, or a deadline that leaves no room while a real provider is configured.
  if (timeoutMs + PAYMENT_RECORD_MARGIN_MS > deadlineMs && (env['PAYMENTS_TIMEOUT_MS'] !== undefined || secretKey !== null)) {
    throw new ConfigError(
      env['PAYMENTS_TIMEOUT_MS'] !== undefined ? 'PAYMENTS_TIMEOUT_MS' : 'REQUEST_DEADLINE_MS',
      `a payment call of ${timeoutMs} ms must leave ${PAYMENT_RECORD_MARGIN_MS} ms of REQUEST_DEADLINE_MS (${deadlineMs}) ` +
        'to record its outcome in the same request',
    );
  }
  return {
    secretKey,
    apiUrl: readStripeApiUrl(env),
    timeoutMs,
    reconcileAfterMs: readInt(env, 'PAYMENTS_RECONCILE_AFTER_MS', 60_000, 100, 3_600_000),
    reconcileIntervalMs: readInt(env, 'PAYMENTS_RECONCILE_INTERVAL_MS', 5_000, 10, 600_000),
    reconcileForMs: readDuration(env, 'PAYMENTS_RECONCILE_FOR', RECONCILE_FOR_MAX_MS, 1_000, RECONCILE_FOR_MAX_MS),
    maxWaiting: readInt(env, 'PAYMENTS_MAX_WAITING', 256, 1, 100_000),
  };
}

const DEVELOPMENT_ENVIRONMENTS = ['development', 'test'];

function readNodeEnv(env: Env): string {
  const raw = readString(env, 'NODE_ENV') ?? 'development';
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(raw))
    throw new ConfigError('NODE_ENV', `expected a name such as production or development, got "${raw}"`);
  return raw;
}

/** HOST: an IPv4 or IPv6 address or a host name to bind to. */
function readHost(env: Env, devMode: boolean): string {
  const raw = readString(env, 'HOST');
  // Dev mode trusts x-hasura-* headers from anyone who can connect: only this machine may.
  if (raw === null) return devMode ? '127.0.0.1' : '0.0.0.0';
  if (!/^[A-Za-z0-9.:-]{1,253}$/.test(raw)) throw new ConfigError('HOST', `expected an address or host name to bind to, got "${raw}"`);
  return raw;
}

function readDatabaseUrl(env: Env, nodeEnv: string, development: boolean): string | null {
  const raw = readString(env, 'DATABASE_URL');
  if (raw === null && !development) {
    throw new ConfigError(
      'DATABASE_URL',
      `NODE_ENV=${nodeEnv} needs DATABASE_URL: the embedded PostgreSQL is for development and tests (one local folder, no backups)`,
    );
  }
  if (raw === null) return null;
  try {
    parseDatabaseUrl(raw);
  } catch (error) {
    if (error instanceof DatabaseUrlError) throw new ConfigError('DATABASE_URL', error.message);
    throw error;
  }
  return raw;
}

/** pino's level names; anything else would reach pino as a raw exception. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function readLogLevel(env: Env, nodeEnv: string): string {
  const raw = readString(env, 'LOG_LEVEL');
  if (raw === null) return nodeEnv === 'test' ? 'silent' : 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(raw)) {
    throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  }
  return raw;
}

/** An absolute path of a file that exists (its contents are checked where they are read). */
function readFile(env: Env, name: string): string | null {
  const raw = readString(env, name);
  if (raw === null) return null;
  const file = path.resolve(raw);
  const found = statSync(file, { throwIfNoEntry: false });
  if (!found?.isFile()) throw new ConfigError(name, `${file} ${found ? 'is not a file' : 'does not exist'}`);
  return file;
}

/** An absolute folder path; a file in its place is a mistake worth naming before PostgreSQL trips on it. */
function readFolder(env: Env, name: string): string | null {
  const raw = readString(env, name);
  if (raw === null) return null;
  const folder = path.resolve(raw);
  if (statSync(folder, { throwIfNoEntry: false })?.isDirectory() === false) {
    throw new ConfigError(name, `${folder} is a file; expected a folder (created when missing)`);
  }
  return folder;
}

function readTimeZone(env: Env): string {
  const zone = readString(env, 'BUSINESS_TIME_ZONE') ?? 'Asia/Tokyo';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
  } catch {
    throw new ConfigError('BUSINESS_TIME_ZONE', `unknown IANA time zone "${zone}"`);
  }
  return zone;
}

const ANY_ORIGIN = '*';

const SAMPLERS: readonly Sampler[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
const EXPORTERS = ['otlp', 'console', 'none'] as const;
/** The OTLP/HTTP traces URL the SDKs use when OTEL_TRACES_EXPORTER=otlp names no endpoint. */
export const DEFAULT_OTLP_TRACES_ENDPOINT = 'http://localhost:4318/v1/traces';
/** Probes and scrapes: a trace each every few seconds, saying nothing. */
const DEFAULT_UNTRACED_PATHS = ['/health', '/ready', '/metrics'];

/**
 * OTEL_TRACES_EXPORTER as the SDKs read it: a comma-separated list of `otlp`, `console`, or `none`.
 * Unset: OTLP when an endpoint is set, else nothing.
 */
function readExporters(env: Env, endpointSet: boolean): { otlp: boolean; console: boolean } {
  const raw = readString(env, 'OTEL_TRACES_EXPORTER');
  if (raw === null) return { otlp: endpointSet, console: false };
  const names = raw.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !(EXPORTERS as readonly string[]).includes(name));
  if (unknown.length > 0 || (names.includes('none') && names.length > 1)) {
    throw new ConfigError(
      'OTEL_TRACES_EXPORTER',
      `expected otlp, console or both (comma-separated), or none alone, got "${raw}" (zipkin and jaeger are not built in: use OTLP)`,
    );
  }
  return { otlp: names.includes('otlp'), console: names.includes('console') };
}

/** TRACES_EXCLUDED_PATHS: comma-separated request paths that make no trace, or `none` to trace every path. */
function readUntracedPaths(env: Env): string[] {
  const raw = readString(env, 'TRACES_EXCLUDED_PATHS');
  if (raw === null) return DEFAULT_UNTRACED_PATHS;
  if (raw === 'none') return [];
  const paths = raw.split(',').map((entry) => entry.trim());
  const wrong = paths.filter((entry) => !/^\/[\x21-\x7e]*$/.test(entry));
  if (wrong.length > 0) {
    throw new ConfigError('TRACES_EXCLUDED_PATHS', `expected paths such as /health,/ready (or none), got "${wrong.join('", "')}"`);
  }
  return paths;
}

/**
 * The OTel variables as the SDKs define them: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the traces URL
 * itself; OTEL_EXPORTER_OTLP_ENDPOINT is a base to which /v1/traces is added.
 */
function readTracing(env: Env): TracingConfig {
  const base = readHttpUrl(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const traces = readHttpUrl(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const protocol = readString(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new ConfigError('OTEL_EXPORTER_OTLP_PROTOCOL', `expected ${PROTOCOLS.join(' or ')} (OTLP over HTTP), got "${protocol}"`);
  }
  const sampler = readString(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!(SAMPLERS as readonly string[]).includes(sampler)) {
    throw new ConfigError('OTEL_TRACES_SAMPLER', `expected one of ${SAMPLERS.join(', ')}, got "${sampler}"`);
  }
  const ratioRaw = readString(env, 'OTEL_TRACES_SAMPLER_ARG');
  const samplerRatio = ratioRaw === null ? 1 : Number(ratioRaw);
  if (!/^\d*\.?\d+$/.test(ratioRaw ?? '1') || samplerRatio > 1) {
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `expected a ratio from 0 to 1, got "${ratioRaw}"`);
  }
  const serviceName = readString(env, 'OTEL_SERVICE_NAME') ?? 'mutation-backend';
  if (!/^[\x21-\x7e]{1,255}$/.test(serviceName))
    throw new ConfigError('OTEL_SERVICE_NAME', `expected a name without spaces, got "${serviceName}"`);
  const endpoint = traces ?? (base === null ? null : `${base.replace(/\/+$/, '')}/v1/traces`);
  const exporters = readExporters(env, endpoint !== null);
  return {
    tracesEndpoint: exporters.otlp ? (endpoint ?? DEFAULT_OTLP_TRACES_ENDPOINT) : null,
    console: exporters.console,
    excludedPaths: readUntracedPaths(env),
    protocol: protocol as TracingConfig['protocol'],
    serviceName,
    sampler: sampler as Sampler,
    samplerRatio,
    scheduleDelayMs: readInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5_000, 0, 600_000),
    preparedStatementText: readStatementText(env),
  };
}

/**
 * TRACES_STATEMENT_TEXT: `unprepared` (every statement's span carries its text, except a prepared
 * statement's, which its name and summary identify) or `all`.
 */
function readStatementText(env: Env): boolean {
  const raw = readString(env, 'TRACES_STATEMENT_TEXT') ?? 'unprepared';
  if (raw !== 'unprepared' && raw !== 'all') throw new ConfigError('TRACES_STATEMENT_TEXT', `expected unprepared or all, got "${raw}"`);
  return raw === 'all';
}

/** CORS_ORIGINS: comma-separated origins such as https://app.example.com, or * for any. */
function readOrigins(env: Env, development: boolean): string[] {
  const raw = readString(env, 'CORS_ORIGINS');
  if (raw === null) return development ? [ANY_ORIGIN] : [];
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
      throw new ConfigError('CORS_ORIGINS', `"${origin}" is not an origin (expected scheme://host[:port] with no path or trailing slash)`);
    }
  }
  if (origins.includes(ANY_ORIGIN) && origins.length > 1) {
    throw new ConfigError('CORS_ORIGINS', '* stands alone: either any origin or a list of origins');
  }
  return origins;
}

/** TRUST_PROXY: what proxy-addr accepts (addresses, CIDR ranges, its names), checked by compiling it. */
function readTrustProxy(env: Env): string[] {
  const raw = readString(env, 'TRUST_PROXY');
  if (raw === null) return [];
  const list = raw
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  try {
    proxyaddr.compile(list);
  } catch (error) {
    throw new ConfigError(
      'TRUST_PROXY',
      `expected addresses, CIDR ranges or loopback, linklocal, uniquelocal separated by commas: ${(error as Error).message}`,
    );
  }
  return list;
}

function readEdge(env: Env, development: boolean, poolMax: number): EdgeConfig {
  const metricsToken = readString(env, 'METRICS_TOKEN');
  if (metricsToken !== null && metricsToken.length < 16) throw new ConfigError('METRICS_TOKEN', 'must be at least 16 characters');
  return {
    maxQueryDepth: readInt(env, 'MAX_QUERY_DEPTH', 10, 1, 100),
    maxAliases: readInt(env, 'MAX_ALIASES', 15, 0, 1_000),
    maxQueryTokens: readInt(env, 'MAX_QUERY_TOKENS', 1_000, 50, 100_000),
    maxQueryCost: readInt(env, 'MAX_QUERY_COST', 5_000, 1, 10_000_000),
    introspection: readBoolean(env, 'GRAPHQL_INTROSPECTION', development),
    corsOrigins: readOrigins(env, development),
    metricsToken,
    trustedDocumentsPath: readFile(env, 'TRUSTED_DOCUMENTS'),
    maxInFlight: readInt(env, 'MAX_IN_FLIGHT', poolMax, 1, 10_000),
    tenantQueueMax: readInt(env, 'TENANT_QUEUE_MAX', 256, 0, 100_000),
    anonymous: {
      maxInFlight: readInt(env, 'ANONYMOUS_MAX_IN_FLIGHT', 1, 1, 10_000),
      queueMax: readInt(env, 'ANONYMOUS_QUEUE_MAX', 16, 0, 100_000),
      rate: readInt(env, 'ANONYMOUS_RATE', 2, 1, 1_000_000),
      burst: readInt(env, 'ANONYMOUS_BURST', 2, 1, 1_000_000),
    },
    memberWriteRate: readInt(env, 'MEMBER_WRITE_RATE', 50, 1, 1_000_000),
    memberWriteBurst: readInt(env, 'MEMBER_WRITE_BURST', 200, 1, 1_000_000),
    trustProxy: readTrustProxy(env),
    maxSelections: readInt(env, 'MAX_SELECTIONS', 200, 10, 100_000),
    documentCacheBytes: readInt(env, 'DOCUMENT_CACHE_BYTES', 16 * 1024 * 1024, 0, 4 * 1024 * 1024 * 1024),
  };
}

function readShutdown(env: Env): ShutdownConfig {
  return {
    graceMs: readInt(env, 'SHUTDOWN_GRACE_MS', 5_000, 0, 600_000),
    drainTimeoutMs: readInt(env, 'HTTP_DRAIN_TIMEOUT_MS', 15_000, 0, 600_000),
  };
}

/** The migrator's settings when nothing configures them (a test's template, a tool). */
export const MIGRATION_DEFAULTS: MigrationConfig = {
  lockTimeoutMs: 200,
  statementTimeoutMs: 600_000,
  retryForMs: 60_000,
  lockWaitMs: 60_000,
};

function readMigrations(env: Env): MigrationConfig {
  const d = MIGRATION_DEFAULTS;
  return {
    lockTimeoutMs: readInt(env, 'MIGRATION_LOCK_TIMEOUT_MS', d.lockTimeoutMs, 10, 600_000),
    statementTimeoutMs: readInt(env, 'MIGRATION_STATEMENT_TIMEOUT_MS', d.statementTimeoutMs, 100, 86_400_000),
    retryForMs: readInt(env, 'MIGRATION_RETRY_FOR_MS', d.retryForMs, 0, 3_600_000),
    lockWaitMs: readInt(env, 'MIGRATION_LOCK_WAIT_MS', d.lockWaitMs, 1, 3_600_000),
  };
}

function readRetention(env: Env): RetentionConfig {
  return {
    outboxSentHours: readInt(env, 'OUTBOX_RETENTION_HOURS', 168, 0, 87_600),
    huddleEndedHours: readInt(env, 'HUDDLE_RETENTION_HOURS', 168, 0, 87_600),
    intervalMs: readInt(env, 'RETENTION_INTERVAL_MS', 60_000, 10, 86_400_000),
    batchSize: readInt(env, 'RETENTION_BATCH_SIZE', 1_000, 1, 100_000),
  };
}

function readHuddles(env: Env): HuddleConfig {
  return {
    cleanupIntervalMs: readInt(env, 'HUDDLE_CLEANUP_INTERVAL_MS', 10_000, 10, 3_600_000),
    staleAfterMs: readInt(env, 'HUDDLE_STALE_AFTER_MS', 30_000, 100, 86_400_000),
    cleanupBatchSize: readInt(env, 'HUDDLE_CLEANUP_BATCH_SIZE', 100, 1, 10_000),
  };
}

function readIdempotency(env: Env): IdempotencyConfig {
  return {
    ttlHours: readInt(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 365),
    cleanupIntervalMs: readInt(env, 'IDEMPOTENCY_CLEANUP_INTERVAL_MS', 60_000, 10, 86_400_000),
  };
}

function readCoupons(env: Env): CouponConfig {
  return {
    businessTimeZone: readTimeZone(env),
    budgetLeaseTtlMs: readInt(env, 'BUDGET_LEASE_TTL_MS', 10_000, 300, 3_600_000),
    issueBatchMax: readInt(env, 'COUPON_ISSUE_BATCH_MAX', 1, 1, 1000),
  };
}

function readRequests(env: Env): RequestConfig {
  return {
    deadlineMs: readInt(env, 'REQUEST_DEADLINE_MS', 10_000, 100, 25_000),
    transactionMaxAttempts: readInt(env, 'TRANSACTION_MAX_ATTEMPTS', 8, 1, 100),
  };
}

function readEmbeddedPostgres(env: Env): EmbeddedPostgresConfig {
  return {
    port: readInt(env, 'EMBEDDED_PG_PORT', 54_329, 1024, 65_535),
    dataDir: readFolder(env, 'EMBEDDED_PG_DATA_DIR'),
    sharedDir: readFolder(env, 'EMBEDDED_PG_SHARED_DIR'),
  };
}

function readDatabase(env: Env, { nodeEnv, development }: ProcessConfig): DatabaseConfig {
  return {
    url: readDatabaseUrl(env, nodeEnv, development),
    connectTimeoutMs: readInt(env, 'DB_CONNECT_TIMEOUT_MS', 30_000, 0, 3_600_000),
    healthCheckIntervalMs: readInt(env, 'DB_HEALTH_CHECK_INTERVAL_MS', 2_000, 100, 600_000),
    poolMax: readInt(env, 'DB_POOL_MAX', 10, 1, 1000),
    poolAcquireTimeoutMs: readInt(env, 'DB_POOL_ACQUIRE_TIMEOUT_MS', 3_000, 1, 600_000),
    poolConnectTimeoutMs: readInt(env, 'DB_POOL_CONNECT_TIMEOUT_MS', 3_000, 100, 600_000),
    preparedStatements: readBoolean(env, 'DB_PREPARED_STATEMENTS', true),
    lockTimeoutMs: readInt(env, 'LOCK_TIMEOUT_MS', 2_000, 1, 600_000),
    statementTimeoutMs: readInt(env, 'STATEMENT_TIMEOUT_MS', 5_000, 10, 600_000),
    idleInTransactionTimeoutMs: readInt(env, 'IDLE_IN_TRANSACTION_TIMEOUT_MS', 10_000, 100, 600_000),
  };
}

/** `devMode`: neither secret nor JWT key, which decides where the server listens by default. */
function readServer(env: Env, devMode: boolean): ServerConfig {
  return {
    host: readHost(env, devMode),
    port: readInt(env, 'PORT', 4000, 0, 65_535),
    maxBodyBytes: readInt(env, 'MAX_BODY_BYTES', 100_000, 1_000, 10_000_000),
    requestTimeoutMs: readInt(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 1_000, 600_000),
    maxConnections: readInt(env, 'HTTP_MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    keepAliveTimeoutMs: readInt(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 65_000, 1_000, 3_600_000),
  };
}

function readProcess(env: Env, nodeEnv: string): ProcessConfig {
  return {
    nodeEnv,
    development: DEVELOPMENT_ENVIRONMENTS.includes(nodeEnv),
    logLevel: readLogLevel(env, nodeEnv),
    runWorkers: readBoolean(env, 'RUN_WORKERS', true),
    webConcurrency: readInt(env, 'WEB_CONCURRENCY', 1, 1, 64),
    httpHeartbeatTimeoutMs: readInt(env, 'HTTP_HEARTBEAT_TIMEOUT_MS', 15_000, 1_000, 600_000),
  };
}

/** `servesHttp`: see `LoadOptions`. */
function readIdentity(env: Env, nodeEnv: string, servesHttp: boolean): IdentityConfig {
  const development = DEVELOPMENT_ENVIRONMENTS.includes(nodeEnv);
  const actionSecret = readString(env, 'ACTION_SECRET');
  const jwtRaw = readString(env, 'JWT_SECRET');
  const jwt = jwtRaw === null ? null : parseJwtSecret(jwtRaw);
  if (servesHttp && !development && actionSecret === null && jwt === null) {
    throw new ConfigError(
      'ACTION_SECRET',
      `NODE_ENV=${nodeEnv} needs ACTION_SECRET or JWT_SECRET: dev mode, which trusts x-hasura-* headers from anyone, runs only with NODE_ENV unset, development or test`,
    );
  }
  if (actionSecret !== null && actionSecret.length < 16) {
    throw new ConfigError('ACTION_SECRET', 'must be at least 16 characters');
  }
  return { actionSecret, jwt };
}

export interface LoadOptions {
  /**
   * Whether the process answers HTTP. Only a server must prove who its callers are outside
   * development; the worker and the command-line tools take no requests.
   */
  servesHttp?: boolean;
}

export function loadConfig(env: Env = process.env, { servesHttp = true }: LoadOptions = {}): AppConfig {
  const nodeEnv = readNodeEnv(env);
  // Whether this environment may run without a secret is the first thing start-up says.
  const identity = readIdentity(env, nodeEnv, servesHttp);
  const processConfig = readProcess(env, nodeEnv);
  const database = readDatabase(env, processConfig);
  const requests = readRequests(env);
  return {
    process: processConfig,
    server: readServer(env, isDevMode({ identity })),
    database,
    embeddedPostgres: readEmbeddedPostgres(env),
    requests,
    identity,
    coupons: readCoupons(env),
    idempotency: readIdempotency(env),
    outbox: readOutbox(env),
    payments: readPayments(env, requests.deadlineMs),
    huddles: readHuddles(env),
    retention: readRetention(env),
    migrations: readMigrations(env),
    shutdown: readShutdown(env),
    edge: readEdge(env, processConfig.development, database.poolMax),
    tracing: readTracing(env),
  };
}

/** Dev mode trusts x-hasura-* headers as sent; only a configuration with no secret and no JWT key. */
export function isDevMode({ identity }: Pick<AppConfig, 'identity'>): boolean {
  return identity.actionSecret === null && identity.jwt === null;
}
