/**
 * Environment -> typed configuration. Every value is checked once at start-up; a wrong value stops
 * the process with a message that names the variable, so a typo never surfaces later as a hang or
 * a silent default.
 */

export interface JwtConfig {
  type: 'HS256' | 'HS384' | 'HS512';
  key: string;
  claimsNamespace: string;
}

export interface AppConfig {
  nodeEnv: 'development' | 'production' | 'test';
  port: number;
  databaseUrl: string | null;
  embeddedPostgresPort: number;
  /** Null: .data/postgres in the project. */
  embeddedDataDir: string | null;
  dbPoolMax: number;
  dbPoolAcquireTimeoutMs: number;
  /** Named prepared statements for the hot path; off behind a pooler that cannot keep them (PgBouncer < 1.21 in transaction mode). */
  dbPreparedStatements: boolean;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  requestDeadlineMs: number;
  transactionMaxAttempts: number;
  actionSecret: string | null;
  jwt: JwtConfig | null;
  businessTimeZone: string;
  maxBodyBytes: number;
  logLevel: string;
  /** Run the outbox relay and the other background loops inside this process. */
  runWorkers: boolean;
  /** HTTP worker processes (node:cluster) sharing the port; 1 runs everything in one process. */
  webConcurrency: number;
  outbox: OutboxConfig;
  huddles: HuddleConfig;
  idempotencyTtlHours: number;
  idempotencyCleanupIntervalMs: number;
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
  maxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
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
  if (raw === null) return null;
  try {
    const url = new URL(raw);
    if (url.protocol === 'http:' || url.protocol === 'https:') return raw;
  } catch {
    // fall through to the error below
  }
  throw new ConfigError(name, `expected an http:// or https:// URL, got "${raw}"`);
}

function readOutbox(env: Env): OutboxConfig {
  const retryBaseDelayMs = readInt(env, 'OUTBOX_RETRY_BASE_MS', 1_000, 1, 3_600_000);
  return {
    webhookUrl: readHttpUrl(env, 'NOTIFY_WEBHOOK_URL'),
    webhookTimeoutMs: readInt(env, 'NOTIFY_WEBHOOK_TIMEOUT_MS', 5_000, 100, 120_000),
    batchSize: readInt(env, 'OUTBOX_BATCH_SIZE', 100, 1, 10_000),
    pollIntervalMs: readInt(env, 'OUTBOX_POLL_INTERVAL_MS', 500, 10, 600_000),
    leaseMs: readInt(env, 'OUTBOX_LEASE_MS', 30_000, 100, 3_600_000),
    maxAttempts: readInt(env, 'OUTBOX_MAX_ATTEMPTS', 10, 1, 1_000),
    retryBaseDelayMs,
    retryMaxDelayMs: readInt(env, 'OUTBOX_RETRY_MAX_MS', 300_000, retryBaseDelayMs, 86_400_000),
  };
}

function readNodeEnv(env: Env): AppConfig['nodeEnv'] {
  const raw = readString(env, 'NODE_ENV') ?? 'development';
  if (raw !== 'development' && raw !== 'production' && raw !== 'test') {
    throw new ConfigError('NODE_ENV', `expected development, production or test, got "${raw}"`);
  }
  return raw;
}

function readDatabaseUrl(env: Env): string | null {
  const raw = readString(env, 'DATABASE_URL');
  if (raw === null) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('DATABASE_URL', 'not a URL (expected postgres://user:password@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', `expected a postgres:// URL, got the scheme "${url.protocol}"`);
  }
  return raw;
}

const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
const HASURA_CLAIMS_NAMESPACE = 'https://hasura.io/jwt/claims';

/** Reads Hasura's HASURA_GRAPHQL_JWT_SECRET JSON form: {"type":"HS256","key":"...","claims_namespace"?}. */
export function parseJwtSecret(raw: string, variable = 'JWT_SECRET'): JwtConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError(variable, 'not JSON; expected {"type":"HS256","key":"<at least 32 characters>"}');
  }
  if (typeof parsed !== 'object' || parsed === null) {
    throw new ConfigError(variable, 'expected a JSON object with "type" and "key"');
  }
  const { type, key, claims_namespace: namespace } = parsed as Record<string, unknown>;
  if (typeof type !== 'string' || !(HMAC_ALGORITHMS as readonly string[]).includes(type)) {
    throw new ConfigError(variable, `"type" must be one of ${HMAC_ALGORITHMS.join(', ')}`);
  }
  // HS256 with a key shorter than its 256-bit output is brute-forceable; Hasura refuses it too.
  if (typeof key !== 'string' || key.length < 32) {
    throw new ConfigError(variable, '"key" must be a string of at least 32 characters');
  }
  if (namespace !== undefined && typeof namespace !== 'string') {
    throw new ConfigError(variable, '"claims_namespace" must be a string');
  }
  return { type: type as JwtConfig['type'], key, claimsNamespace: namespace ?? HASURA_CLAIMS_NAMESPACE };
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

export function loadConfig(env: Env = process.env): AppConfig {
  const nodeEnv = readNodeEnv(env);
  const actionSecret = readString(env, 'ACTION_SECRET');
  const jwtRaw = readString(env, 'JWT_SECRET');
  const jwt = jwtRaw === null ? null : parseJwtSecret(jwtRaw);
  if (nodeEnv === 'production' && actionSecret === null && jwt === null) {
    throw new ConfigError(
      'ACTION_SECRET',
      'NODE_ENV=production needs ACTION_SECRET or JWT_SECRET: dev mode trusts x-hasura-* headers from anyone',
    );
  }
  if (actionSecret !== null && actionSecret.length < 16) {
    throw new ConfigError('ACTION_SECRET', 'must be at least 16 characters');
  }
  const requestDeadlineMs = readInt(env, 'REQUEST_DEADLINE_MS', 10_000, 100, 25_000);
  const statementTimeoutMs = readInt(env, 'STATEMENT_TIMEOUT_MS', 5_000, 10, 600_000);
  return {
    nodeEnv,
    port: readInt(env, 'PORT', 4000, 0, 65_535),
    databaseUrl: readDatabaseUrl(env),
    embeddedPostgresPort: readInt(env, 'EMBEDDED_PG_PORT', 54_329, 1024, 65_535),
    embeddedDataDir: readString(env, 'EMBEDDED_PG_DATA_DIR'),
    dbPoolMax: readInt(env, 'DB_POOL_MAX', 10, 1, 1000),
    dbPoolAcquireTimeoutMs: readInt(env, 'DB_POOL_ACQUIRE_TIMEOUT_MS', 3_000, 1, 600_000),
    dbPreparedStatements: readBoolean(env, 'DB_PREPARED_STATEMENTS', true),
    lockTimeoutMs: readInt(env, 'LOCK_TIMEOUT_MS', 2_000, 1, 600_000),
    statementTimeoutMs,
    idleInTransactionTimeoutMs: readInt(env, 'IDLE_IN_TRANSACTION_TIMEOUT_MS', 10_000, 100, 600_000),
    requestDeadlineMs,
    transactionMaxAttempts: readInt(env, 'TRANSACTION_MAX_ATTEMPTS', 8, 1, 100),
    actionSecret,
    jwt,
    businessTimeZone: readTimeZone(env),
    maxBodyBytes: readInt(env, 'MAX_BODY_BYTES', 100_000, 1_000, 10_000_000),
    logLevel: readString(env, 'LOG_LEVEL') ?? (nodeEnv === 'test' ? 'silent' : 'info'),
    runWorkers: readBoolean(env, 'RUN_WORKERS', true),
    webConcurrency: readInt(env, 'WEB_CONCURRENCY', 1, 1, 64),
    outbox: readOutbox(env),
    idempotencyTtlHours: readInt(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 365),
    idempotencyCleanupIntervalMs: readInt(env, 'IDEMPOTENCY_CLEANUP_INTERVAL_MS', 60_000, 10, 86_400_000),
    huddles: {
      cleanupIntervalMs: readInt(env, 'HUDDLE_CLEANUP_INTERVAL_MS', 10_000, 10, 3_600_000),
      staleAfterMs: readInt(env, 'HUDDLE_STALE_AFTER_MS', 30_000, 100, 86_400_000),
      cleanupBatchSize: readInt(env, 'HUDDLE_CLEANUP_BATCH_SIZE', 100, 1, 10_000),
    },
  };
}

/** Dev mode trusts x-hasura-* headers as sent; only a configuration with no secret and no JWT key. */
export function isDevMode(config: AppConfig): boolean {
  return config.actionSecret === null && config.jwt === null;
}
