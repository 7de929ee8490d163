import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/core/config.js';

/**
 * Every refusal of the configuration, word for word: one bad value per variable (a second where its
 * form and its range are refused apart), and the checks across variables. Each row runs with
 * NODE_ENV=test unless it names another. A new variable needs a row: the walk below names it.
 */
const PACKAGE_JSON = fileURLToPath(new URL('../package.json', import.meta.url));
const README = fileURLToPath(new URL('../README.md', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const MISSING = `${ROOT}/missing.json`;

const REFUSALS: [Record<string, string>, string][] = [
  [{ ACTION_SECRET: 'short' }, 'ACTION_SECRET: must be at least 16 characters'],
  [{ JWT_SECRET: 'plain text' }, 'JWT_SECRET: not JSON; expected Hasura\'s form, e.g. {"type":"RS256","jwk_url":"https://…/jwks.json"}'],
  [{ JWT_SECRET: '[]' }, 'JWT_SECRET: expected a JSON object'],
  [{ JWT_SECRET: '{"type":"HS256"}' }, 'JWT_SECRET.key: needed: a "type" with its "key", or a "jwk_url"'],
  [{ JWT_SECRET: '{"type":"HS256","key":"short"}' }, 'JWT_SECRET.key: a shared secret must be a string of at least 32 characters'],
  [
    { JWT_SECRET: '{"typ":"HS256"}' },
    'JWT_SECRET.typ: unknown field; the fields are type, key, jwk_url, audience, issuer, claims_namespace, claims_namespace_path, claims_format, claims_map, allowed_skew, header',
  ],
  [
    { NODE_ENV: 'production' },
    'ACTION_SECRET: NODE_ENV=production needs ACTION_SECRET or JWT_SECRET: dev mode, which trusts x-hasura-* headers from anyone, runs only with NODE_ENV unset, development or test',
  ],
  [{ NODE_ENV: 'not an environment' }, 'NODE_ENV: expected a name such as production or development, got "not an environment"'],
  [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
  [{ RUN_WORKERS: 'maybe' }, 'RUN_WORKERS: expected true or false, got "maybe"'],
  [{ WEB_CONCURRENCY: 'all' }, 'WEB_CONCURRENCY: expected a whole number, got "all"'],
  [{ WEB_CONCURRENCY: '65' }, 'WEB_CONCURRENCY: expected a number from 1 to 64, got 65'],
  [{ HTTP_HEARTBEAT_TIMEOUT_MS: '999' }, 'HTTP_HEARTBEAT_TIMEOUT_MS: expected a number from 1000 to 600000, got 999'],
  [{ DATABASE_URL: 'mysql://localhost/shop' }, 'DATABASE_URL: expected a postgres:// URL, got the scheme "mysql:"'],
  [
    { NODE_ENV: 'production', ACTION_SECRET: 'a-secret-of-16-chars-or-more' },
    'DATABASE_URL: NODE_ENV=production needs DATABASE_URL: the embedded PostgreSQL is for development and tests (one local folder, no backups)',
  ],
  [{ DB_CONNECT_TIMEOUT_MS: 'a while' }, 'DB_CONNECT_TIMEOUT_MS: expected a whole number, got "a while"'],
  [{ DB_HEALTH_CHECK_INTERVAL_MS: '99' }, 'DB_HEALTH_CHECK_INTERVAL_MS: expected a number from 100 to 600000, got 99'],
  [{ DB_POOL_MAX: '0' }, 'DB_POOL_MAX: expected a number from 1 to 1000, got 0'],
  [{ DB_POOL_ACQUIRE_TIMEOUT_MS: '-5' }, 'DB_POOL_ACQUIRE_TIMEOUT_MS: expected a whole number, got "-5"'],
  [{ DB_POOL_CONNECT_TIMEOUT_MS: '3s' }, 'DB_POOL_CONNECT_TIMEOUT_MS: expected a whole number, got "3s"'],
  [{ DB_PREPARED_STATEMENTS: 'usually' }, 'DB_PREPARED_STATEMENTS: expected true or false, got "usually"'],
  [{ LOCK_TIMEOUT_MS: '1.5' }, 'LOCK_TIMEOUT_MS: expected a whole number, got "1.5"'],
  [{ STATEMENT_TIMEOUT_MS: '9' }, 'STATEMENT_TIMEOUT_MS: expected a number from 10 to 600000, got 9'],
  [{ IDLE_IN_TRANSACTION_TIMEOUT_MS: '0' }, 'IDLE_IN_TRANSACTION_TIMEOUT_MS: expected a number from 100 to 600000, got 0'],
  [{ REQUEST_DEADLINE_MS: '60000' }, 'REQUEST_DEADLINE_MS: expected a number from 100 to 25000, got 60000'],
  [{ TRANSACTION_MAX_ATTEMPTS: 'many' }, 'TRANSACTION_MAX_ATTEMPTS: expected a whole number, got "many"'],
  [{ HOST: 'no spaces please' }, 'HOST: expected an address or host name to bind to, got "no spaces please"'],
  [{ PORT: 'eighty' }, 'PORT: expected a whole number, got "eighty"'],
  [{ PORT: '65536' }, 'PORT: expected a number from 0 to 65535, got 65536'],
  [{ MAX_BODY_BYTES: '1e6' }, 'MAX_BODY_BYTES: expected a whole number, got "1e6"'],
  [{ HTTP_REQUEST_TIMEOUT_MS: '10' }, 'HTTP_REQUEST_TIMEOUT_MS: expected a number from 1000 to 600000, got 10'],
  [{ HTTP_MAX_CONNECTIONS: '0' }, 'HTTP_MAX_CONNECTIONS: expected a number from 1 to 1000000, got 0'],
  [{ HTTP_KEEP_ALIVE_TIMEOUT_MS: '5' }, 'HTTP_KEEP_ALIVE_TIMEOUT_MS: expected a number from 1000 to 3600000, got 5'],
  [{ EMBEDDED_PG_PORT: '80' }, 'EMBEDDED_PG_PORT: expected 0 or a number from 1024 to 65535, got 80'],
  [{ EMBEDDED_PG_PORT: 'x' }, 'EMBEDDED_PG_PORT: expected a whole number, got "x"'],
  [{ EMBEDDED_PG_PORT: '70000' }, 'EMBEDDED_PG_PORT: expected 0 or a number from 1024 to 65535, got 70000'],
  [{ EMBEDDED_PG_DATA_DIR: PACKAGE_JSON }, `EMBEDDED_PG_DATA_DIR: ${PACKAGE_JSON} is a file; expected a folder (created when missing)`],
  [{ EMBEDDED_PG_SHARED_DIR: README }, `EMBEDDED_PG_SHARED_DIR: ${README} is a file; expected a folder (created when missing)`],
  [{ BUSINESS_TIME_ZONE: 'Mars/Olympus' }, 'BUSINESS_TIME_ZONE: unknown IANA time zone "Mars/Olympus"'],
  [{ BUDGET_LEASE_TTL_MS: '100' }, 'BUDGET_LEASE_TTL_MS: expected a number from 300 to 3600000, got 100'],
  [{ COUPON_ISSUE_BATCH_MAX: '0' }, 'COUPON_ISSUE_BATCH_MAX: expected a number from 1 to 1000, got 0'],
  [{ IDEMPOTENCY_TTL_HOURS: 'a day' }, 'IDEMPOTENCY_TTL_HOURS: expected a whole number, got "a day"'],
  [{ IDEMPOTENCY_CLEANUP_INTERVAL_MS: '1' }, 'IDEMPOTENCY_CLEANUP_INTERVAL_MS: expected a number from 10 to 86400000, got 1'],
  [
    { NOTIFY_WEBHOOK_URL: 'ftp://example.com/hook' },
    'NOTIFY_WEBHOOK_URL: expected an http:// or https:// URL, got "ftp://example.com/hook"',
  ],
  [
    { NOTIFY_WEBHOOK_SECRET: 'plain-secret' },
    'NOTIFY_WEBHOOK_SECRET: expected whsec_ and the base64 of 24 to 64 random bytes (openssl rand -base64 32)',
  ],
  [
    { NOTIFY_WEBHOOK_SECRET: `whsec_${Buffer.alloc(16).toString('base64')}` },
    'NOTIFY_WEBHOOK_SECRET: expected whsec_ and the base64 of 24 to 64 random bytes (openssl rand -base64 32)',
  ],
  [
    {
      NODE_ENV: 'production',
      ACTION_SECRET: 'a-secret-of-16-chars-or-more',
      DATABASE_URL: 'postgres://app@db/shop',
      NOTIFY_WEBHOOK_URL: 'https://example.com/hook',
    },
    'NOTIFY_WEBHOOK_SECRET: NODE_ENV=production with NOTIFY_WEBHOOK_URL needs NOTIFY_WEBHOOK_SECRET: the relay refuses to post events a receiver cannot verify',
  ],
  [
    { NOTIFY_WEBHOOK_SECRET_PREVIOUS: `whsec_${Buffer.alloc(32).toString('base64')}` },
    'NOTIFY_WEBHOOK_SECRET_PREVIOUS: is the secret being replaced: set NOTIFY_WEBHOOK_SECRET to the new one',
  ],
  [
    { NOTIFY_WEBHOOK_SECRET_PREVIOUS: 'whsec_short' },
    'NOTIFY_WEBHOOK_SECRET_PREVIOUS: expected whsec_ and the base64 of 24 to 64 random bytes (openssl rand -base64 32)',
  ],
  [{ NOTIFY_WEBHOOK_TIMEOUT_MS: '5s' }, 'NOTIFY_WEBHOOK_TIMEOUT_MS: expected a whole number, got "5s"'],
  [{ OUTBOX_BATCH_SIZE: '0' }, 'OUTBOX_BATCH_SIZE: expected a number from 1 to 10000, got 0'],
  [{ OUTBOX_POLL_INTERVAL_MS: 'idle' }, 'OUTBOX_POLL_INTERVAL_MS: expected a whole number, got "idle"'],
  [{ OUTBOX_LEASE_MS: '30 seconds' }, 'OUTBOX_LEASE_MS: expected a whole number, got "30 seconds"'],
  [{ OUTBOX_RETRY_FOR: '72' }, 'OUTBOX_RETRY_FOR: expected a duration such as 72h, 30m or 90s, got "72"'],
  [{ OUTBOX_RETRY_FOR: '31d' }, 'OUTBOX_RETRY_FOR: expected from 1 s to 720 h, got 31d'],
  [{ OUTBOX_RETRY_FOR: '999ms' }, 'OUTBOX_RETRY_FOR: expected from 1 s to 720 h, got 999ms'],
  [{ OUTBOX_MAX_ATTEMPTS: '0' }, 'OUTBOX_MAX_ATTEMPTS: expected a number from 1 to 1000000, got 0'],
  [{ OUTBOX_MAX_ATTEMPTS: 'x' }, 'OUTBOX_MAX_ATTEMPTS: expected a whole number, got "x"'],
  [{ OUTBOX_RETRY_BASE_MS: '0' }, 'OUTBOX_RETRY_BASE_MS: expected a number from 1 to 3600000, got 0'],
  [{ OUTBOX_RETRY_MAX_MS: 'never' }, 'OUTBOX_RETRY_MAX_MS: expected a whole number, got "never"'],
  [{ OUTBOX_RETRY_BASE_MS: '2000', OUTBOX_RETRY_MAX_MS: '1000' }, 'OUTBOX_RETRY_MAX_MS: expected a number from 2000 to 86400000, got 1000'],
  [
    { STRIPE_SECRET_KEY: 'pk_test_publishable' },
    'STRIPE_SECRET_KEY: expected a Stripe secret or restricted key (sk_live_…, sk_test_…, rk_live_…, rk_test_…)',
  ],
  [
    { STRIPE_API_URL: 'https://api.stripe.com/v1' },
    'STRIPE_API_URL: expected scheme://host[:port] with no path, query or credentials, got "https://api.stripe.com/v1"',
  ],
  [{ STRIPE_API_URL: 'stripe' }, 'STRIPE_API_URL: expected an http:// or https:// URL, got "stripe"'],
  [
    { STRIPE_WEBHOOK_SECRET: 'sk_test_not_a_webhook_secret' },
    "STRIPE_WEBHOOK_SECRET: expected the endpoint's signing secret from Stripe's dashboard or `stripe listen` (whsec_…)",
  ],
  [{ PAYMENTS_ACTION_TIMEOUT_MS: '999' }, 'PAYMENTS_ACTION_TIMEOUT_MS: expected a number from 1000 to 86400000, got 999'],
  [
    { PAYMENTS_TIMEOUT_MS: '20000' },
    'PAYMENTS_TIMEOUT_MS: a payment call of 20000 ms must leave 1000 ms of REQUEST_DEADLINE_MS (10000) to record its outcome in the same request',
  ],
  [{ PAYMENTS_TIMEOUT_MS: '150' }, 'PAYMENTS_TIMEOUT_MS: expected a number from 200 to 60000, got 150'],
  [
    { REQUEST_DEADLINE_MS: '1000', STRIPE_SECRET_KEY: 'sk_test_abc' },
    'REQUEST_DEADLINE_MS: a payment call of 200 ms must leave 1000 ms of REQUEST_DEADLINE_MS (1000) to record its outcome in the same request',
  ],
  [{ PAYMENTS_RECONCILE_AFTER_MS: 'a minute' }, 'PAYMENTS_RECONCILE_AFTER_MS: expected a whole number, got "a minute"'],
  [{ PAYMENTS_RECONCILE_INTERVAL_MS: '0' }, 'PAYMENTS_RECONCILE_INTERVAL_MS: expected a number from 10 to 600000, got 0'],
  [{ PAYMENTS_RECONCILE_FOR: '48h' }, 'PAYMENTS_RECONCILE_FOR: expected from 1 s to 23 h, got 48h'],
  [{ PAYMENTS_MAX_WAITING: '0' }, 'PAYMENTS_MAX_WAITING: expected a number from 1 to 100000, got 0'],
  [{ HUDDLE_CLEANUP_INTERVAL_MS: '-1' }, 'HUDDLE_CLEANUP_INTERVAL_MS: expected a whole number, got "-1"'],
  [{ HUDDLE_STALE_AFTER_MS: 'stale' }, 'HUDDLE_STALE_AFTER_MS: expected a whole number, got "stale"'],
  [{ HUDDLE_CLEANUP_BATCH_SIZE: '100000000' }, 'HUDDLE_CLEANUP_BATCH_SIZE: expected a number from 1 to 10000, got 100000000'],
  [{ OUTBOX_RETENTION_HOURS: 'forever' }, 'OUTBOX_RETENTION_HOURS: expected a whole number, got "forever"'],
  [{ HUDDLE_RETENTION_HOURS: '-1' }, 'HUDDLE_RETENTION_HOURS: expected a whole number, got "-1"'],
  [{ RETENTION_INTERVAL_MS: '0' }, 'RETENTION_INTERVAL_MS: expected a number from 10 to 86400000, got 0'],
  [{ RETENTION_BATCH_SIZE: '0' }, 'RETENTION_BATCH_SIZE: expected a number from 1 to 100000, got 0'],
  [{ MIGRATION_LOCK_TIMEOUT_MS: '0' }, 'MIGRATION_LOCK_TIMEOUT_MS: expected a number from 10 to 600000, got 0'],
  [{ MIGRATION_STATEMENT_TIMEOUT_MS: '50' }, 'MIGRATION_STATEMENT_TIMEOUT_MS: expected a number from 100 to 86400000, got 50'],
  [{ MIGRATION_RETRY_FOR_MS: 'a minute' }, 'MIGRATION_RETRY_FOR_MS: expected a whole number, got "a minute"'],
  [{ MIGRATION_LOCK_WAIT_MS: '0' }, 'MIGRATION_LOCK_WAIT_MS: expected a number from 1 to 3600000, got 0'],
  [{ SHUTDOWN_GRACE_MS: 'soon' }, 'SHUTDOWN_GRACE_MS: expected a whole number, got "soon"'],
  [{ HTTP_DRAIN_TIMEOUT_MS: '1h' }, 'HTTP_DRAIN_TIMEOUT_MS: expected a whole number, got "1h"'],
  [{ MAX_QUERY_DEPTH: '0' }, 'MAX_QUERY_DEPTH: expected a number from 1 to 100, got 0'],
  [{ MAX_ALIASES: '-1' }, 'MAX_ALIASES: expected a whole number, got "-1"'],
  [{ MAX_QUERY_TOKENS: '10' }, 'MAX_QUERY_TOKENS: expected a number from 50 to 100000, got 10'],
  [{ MAX_QUERY_COST: 'cheap' }, 'MAX_QUERY_COST: expected a whole number, got "cheap"'],
  [{ GRAPHQL_INTROSPECTION: 'sometimes' }, 'GRAPHQL_INTROSPECTION: expected true or false, got "sometimes"'],
  [
    { CORS_ORIGINS: 'https://app.example.com/path' },
    'CORS_ORIGINS: "https://app.example.com/path" is not an origin (expected scheme://host[:port] with no path or trailing slash)',
  ],
  [{ CORS_ORIGINS: '*,https://app.example.com' }, 'CORS_ORIGINS: * stands alone: either any origin or a list of origins'],
  [{ METRICS_TOKEN: 'short' }, 'METRICS_TOKEN: must be at least 16 characters'],
  [{ TRUSTED_DOCUMENTS: ROOT }, `TRUSTED_DOCUMENTS: ${ROOT} is not a file`],
  [{ TRUSTED_DOCUMENTS: MISSING }, `TRUSTED_DOCUMENTS: ${MISSING} does not exist`],
  [{ MAX_IN_FLIGHT: '0' }, 'MAX_IN_FLIGHT: expected a number from 1 to 10000, got 0'],
  [{ TENANT_QUEUE_MAX: 'lots' }, 'TENANT_QUEUE_MAX: expected a whole number, got "lots"'],
  [{ ANONYMOUS_MAX_IN_FLIGHT: '0' }, 'ANONYMOUS_MAX_IN_FLIGHT: expected a number from 1 to 10000, got 0'],
  [{ ANONYMOUS_QUEUE_MAX: 'few' }, 'ANONYMOUS_QUEUE_MAX: expected a whole number, got "few"'],
  [{ ANONYMOUS_RATE: '0' }, 'ANONYMOUS_RATE: expected a number from 1 to 1000000, got 0'],
  [{ ANONYMOUS_BURST: '-1' }, 'ANONYMOUS_BURST: expected a whole number, got "-1"'],
  [{ MEMBER_WRITE_RATE: '0' }, 'MEMBER_WRITE_RATE: expected a number from 1 to 1000000, got 0'],
  [{ MEMBER_WRITE_BURST: 'many' }, 'MEMBER_WRITE_BURST: expected a whole number, got "many"'],
  [
    { TRUST_PROXY: '10.0.0.0/99' },
    'TRUST_PROXY: expected addresses, CIDR ranges or loopback, linklocal, uniquelocal separated by commas: invalid range on address: 10.0.0.0/99',
  ],
  [{ MAX_SELECTIONS: '5' }, 'MAX_SELECTIONS: expected a number from 10 to 100000, got 5'],
  [{ DOCUMENT_CACHE_BYTES: '16 MiB' }, 'DOCUMENT_CACHE_BYTES: expected a whole number, got "16 MiB"'],
  [{ DOCUMENT_CACHE_BYTES: '4294967297' }, 'DOCUMENT_CACHE_BYTES: expected a number from 0 to 4294967296, got 4294967297'],
  [{ KNOWN_DOCUMENT_PATH: 'sometimes' }, 'KNOWN_DOCUMENT_PATH: expected true or false, got "sometimes"'],
  [
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
    'OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL, got "collector:4318"',
  ],
  [
    { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://collector:4317' },
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: expected an http:// or https:// URL, got "grpc://collector:4317"',
  ],
  [
    { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    'OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or http/json (OTLP over HTTP), got "grpc"',
  ],
  [
    { OTEL_TRACES_SAMPLER: 'sometimes' },
    'OTEL_TRACES_SAMPLER: expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "sometimes"',
  ],
  [{ OTEL_TRACES_SAMPLER_ARG: '2' }, 'OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "2"'],
  [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, 'OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "half"'],
  [{ OTEL_SERVICE_NAME: 'two words' }, 'OTEL_SERVICE_NAME: expected a name without spaces, got "two words"'],
  [
    { OTEL_TRACES_EXPORTER: 'zipkin' },
    'OTEL_TRACES_EXPORTER: expected otlp, console or both (comma-separated), or none alone, got "zipkin" (zipkin and jaeger are not built in: use OTLP)',
  ],
  [
    { OTEL_TRACES_EXPORTER: 'none,console' },
    'OTEL_TRACES_EXPORTER: expected otlp, console or both (comma-separated), or none alone, got "none,console" (zipkin and jaeger are not built in: use OTLP)',
  ],
  [{ TRACES_EXCLUDED_PATHS: 'health' }, 'TRACES_EXCLUDED_PATHS: expected paths such as /health,/ready (or none), got "health"'],
  [{ OTEL_BSP_SCHEDULE_DELAY: 'soon' }, 'OTEL_BSP_SCHEDULE_DELAY: expected a whole number, got "soon"'],
  [{ TRACES_STATEMENT_TEXT: 'some' }, 'TRACES_STATEMENT_TEXT: expected unprepared or all, got "some"'],
];

function refusalOf(env: Record<string, string>): string {
  try {
    loadConfig({ NODE_ENV: 'test', ...env });
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return 'accepted';
}

/** The variables of the configuration table in docs/operations.md. */
async function documentedVariables(): Promise<string[]> {
  const doc = await readFile(new URL('../docs/operations.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Configuration$/m)[1]!.split(/^## /m)[0]!;
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => /`([A-Z][A-Z0-9_]*)`/.exec(line)![1]!);
}

describe('the refusals of the configuration', () => {
  it.each(REFUSALS)('%j is refused: %s', (env, message) => {
    expect(refusalOf(env)).toBe(message);
  });

  it('lists a refusal of every documented variable', async () => {
    const refused = new Set(REFUSALS.map(([, message]) => /^[A-Z][A-Z0-9_]*/.exec(message)![0]));
    const variables = await documentedVariables();
    expect(variables.length).toBeGreaterThan(30);
    expect(variables.filter((name) => !refused.has(name))).toEqual([]);
  });

  it('lets a process that serves no HTTP run outside development without a secret', () => {
    const production = { NODE_ENV: 'production', DATABASE_URL: 'postgres://app@db.internal/app' };
    expect(() => loadConfig(production)).toThrow(/^ACTION_SECRET: NODE_ENV=production needs ACTION_SECRET or JWT_SECRET/);
    expect(loadConfig(production, { servesHttp: false }).identity).toEqual({ actionSecret: null, jwt: null });
  });
});
