import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { withConfigTable } from '../scripts/config-doc.js';
import { variablesOf } from '../src/core/config/kinds.js';
import { CONFIG_TABLE } from '../src/core/config/table.js';
import { ConfigError, LOG_LEVELS, loadConfig } from '../src/core/config.js';

/** Where the configuration is documented: the table under its "## Configuration" heading. */
const OPERATIONS_DOC = new URL('../docs/operations.md', import.meta.url);

/** The variables of the configuration table in docs/operations.md, in its order. */
async function documentedVariables(): Promise<string[]> {
  const doc = await readFile(OPERATIONS_DOC, 'utf8');
  const sections = doc.split(/^## Configuration$/m);
  expect(sections, 'docs/operations.md has exactly one "## Configuration" section').toHaveLength(2);
  const section = sections[1]!.split(/^## /m)[0]!;
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]!));
}

/** A value no one could mean, per variable. A variable missing here fails the walk below. */
const NONSENSE: Record<string, string> = {
  PORT: 'eighty',
  DATABASE_URL: 'mysql://localhost/shop',
  DB_CONNECT_TIMEOUT_MS: 'a while',
  EMBEDDED_PG_PORT: '80',
  EMBEDDED_PG_DATA_DIR: fileURLToPath(new URL('../package.json', import.meta.url)),
  EMBEDDED_PG_SHARED_DIR: fileURLToPath(new URL('../README.md', import.meta.url)),
  DB_POOL_MAX: '0',
  DB_POOL_ACQUIRE_TIMEOUT_MS: '-5',
  DB_POOL_CONNECT_TIMEOUT_MS: '3s',
  DB_HEALTH_CHECK_INTERVAL_MS: 'often',
  LOCK_TIMEOUT_MS: '1.5',
  STATEMENT_TIMEOUT_MS: 'soon',
  IDLE_IN_TRANSACTION_TIMEOUT_MS: '0',
  BUDGET_LEASE_TTL_MS: '100',
  COUPON_ISSUE_BATCH_MAX: '0',
  REQUEST_DEADLINE_MS: '60000',
  TRANSACTION_MAX_ATTEMPTS: 'many',
  ACTION_SECRET: 'short',
  JWT_SECRET: 'plain text',
  BUSINESS_TIME_ZONE: 'Mars/Olympus',
  MAX_BODY_BYTES: '1e6',
  LOG_LEVEL: 'loud',
  NODE_ENV: 'not an environment',
  HOST: 'no spaces please',
  WEB_CONCURRENCY: 'all',
  HTTP_HEARTBEAT_TIMEOUT_MS: 'soon',
  RUN_WORKERS: 'maybe',
  NOTIFY_WEBHOOK_URL: 'ftp://example.com/hook',
  NOTIFY_WEBHOOK_TIMEOUT_MS: '5s',
  NOTIFY_WEBHOOK_SECRET: 'whsec_tooshort',
  NOTIFY_WEBHOOK_SECRET_PREVIOUS: 'not-a-whsec-secret',
  OUTBOX_BATCH_SIZE: '0',
  OUTBOX_POLL_INTERVAL_MS: 'idle',
  OUTBOX_LEASE_MS: '30 seconds',
  OUTBOX_MAX_ATTEMPTS: '0',
  OUTBOX_RETRY_FOR: '72',
  OUTBOX_RETENTION_HOURS: 'forever',
  HUDDLE_RETENTION_HOURS: '-1',
  RETENTION_INTERVAL_MS: '0',
  RETENTION_BATCH_SIZE: '0',
  HTTP_KEEP_ALIVE_TIMEOUT_MS: '5',
  SHUTDOWN_GRACE_MS: 'soon',
  HTTP_DRAIN_TIMEOUT_MS: '1h',
  MIGRATION_LOCK_TIMEOUT_MS: '0',
  MIGRATION_STATEMENT_TIMEOUT_MS: '50',
  MIGRATION_RETRY_FOR_MS: 'a minute',
  MIGRATION_LOCK_WAIT_MS: '0',
  OUTBOX_RETRY_BASE_MS: '0',
  OUTBOX_RETRY_MAX_MS: 'never',
  HUDDLE_CLEANUP_INTERVAL_MS: '-1',
  HUDDLE_STALE_AFTER_MS: 'stale',
  HUDDLE_CLEANUP_BATCH_SIZE: '100000000',
  IDEMPOTENCY_TTL_HOURS: 'a day',
  IDEMPOTENCY_CLEANUP_INTERVAL_MS: '1',
  MAX_QUERY_TOKENS: '10',
  MAX_ALIASES: '-1',
  MAX_QUERY_DEPTH: '0',
  MAX_QUERY_COST: 'cheap',
  GRAPHQL_INTROSPECTION: 'sometimes',
  DB_PREPARED_STATEMENTS: 'usually',
  CORS_ORIGINS: 'https://app.example.com/path',
  METRICS_TOKEN: 'short',
  TRUSTED_DOCUMENTS: fileURLToPath(new URL('..', import.meta.url)),
  MAX_IN_FLIGHT: '0',
  TENANT_QUEUE_MAX: 'lots',
  ANONYMOUS_MAX_IN_FLIGHT: '0',
  ANONYMOUS_QUEUE_MAX: 'few',
  ANONYMOUS_RATE: '0',
  ANONYMOUS_BURST: '-1',
  TRUST_PROXY: '10.0.0.0/99',
  MEMBER_WRITE_RATE: '0',
  MEMBER_WRITE_BURST: 'many',
  MAX_SELECTIONS: '5',
  DOCUMENT_CACHE_BYTES: '16 MiB',
  KNOWN_DOCUMENT_PATH: 'sometimes',
  HTTP_REQUEST_TIMEOUT_MS: '10',
  HTTP_MAX_CONNECTIONS: '0',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://collector:4317',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
  OTEL_SERVICE_NAME: 'two words',
  OTEL_TRACES_SAMPLER: 'sometimes',
  OTEL_TRACES_SAMPLER_ARG: '2',
  OTEL_BSP_SCHEDULE_DELAY: 'soon',
  OTEL_TRACES_EXPORTER: 'zipkin',
  TRACES_EXCLUDED_PATHS: 'health',
  TRACES_STATEMENT_TEXT: 'some',
  STRIPE_SECRET_KEY: 'pk_test_publishable',
  STRIPE_API_URL: 'https://api.stripe.com/v1',
  STRIPE_WEBHOOK_SECRET: 'sk_test_not_a_signing_secret',
  PAYMENTS_ACTION_TIMEOUT_MS: '15 minutes',
  PAYMENTS_TIMEOUT_MS: '20000',
  PAYMENTS_RECONCILE_AFTER_MS: 'a minute',
  PAYMENTS_RECONCILE_INTERVAL_MS: '0',
  PAYMENTS_RECONCILE_FOR: '48h',
  PAYMENTS_MAX_WAITING: '0',
};

function configErrorOf(env: Record<string, string>): ConfigError | null {
  try {
    loadConfig(env);
    return null;
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

describe('the configuration table of docs/operations.md', () => {
  it('is the table the variables of src/core/config/ print (npm run docs:config writes it)', async () => {
    const doc = await readFile(OPERATIONS_DOC, 'utf8');
    expect(doc, 'docs/operations.md is out of date: run npm run docs:config').toBe(withConfigTable(doc));
    const tabled = Object.values(CONFIG_TABLE).flatMap(({ fields }) => variablesOf(fields).map((variable) => variable.name));
    expect(await documentedVariables()).toEqual(tabled);
    expect(new Set(tabled).size, 'a variable stands once in the table').toBe(tabled.length);
  });

  it('every documented variable stops start-up on a nonsense value, with a message naming it', async () => {
    const variables = await documentedVariables();
    expect(variables.length).toBeGreaterThan(30);
    for (const name of variables) {
      expect(NONSENSE, `add a nonsense value for ${name} to this test`).toHaveProperty(name);
      const error = configErrorOf({ NODE_ENV: 'test', [name]: NONSENSE[name]! });
      expect(error, `${name}=${NONSENSE[name]} was accepted`).not.toBeNull();
      expect(error!.variable).toBe(name);
      expect(error!.message).toMatch(new RegExp(`^${name}: `));
    }
  });

  it('every variable the configuration reads is documented in the table', async () => {
    const documented = new Set(await documentedVariables());
    const read = new Set<string>();
    const env = new Proxy({} as Record<string, string | undefined>, {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadConfig(env);
    expect(read.size).toBeGreaterThan(30);
    expect([...read].filter((name) => !documented.has(name))).toEqual([]);
  });
});

describe('single rules', () => {
  it('LOG_LEVEL takes only pino level names', () => {
    for (const level of LOG_LEVELS) expect(loadConfig({ LOG_LEVEL: level }).process.logLevel).toBe(level);
    expect(() => loadConfig({ LOG_LEVEL: 'verbose' })).toThrow(
      /^LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent/,
    );
  });

  it('production needs DATABASE_URL: the embedded PostgreSQL is for development', () => {
    const production = { NODE_ENV: 'production', ACTION_SECRET: 'a-secret-of-16-chars-or-more' };
    expect(() => loadConfig(production)).toThrow(/^DATABASE_URL: NODE_ENV=production needs DATABASE_URL/);
    expect(loadConfig({ ...production, DATABASE_URL: 'postgres://app@db.internal/app' }).database.url).toBe(
      'postgres://app@db.internal/app',
    );
  });

  it('payments: a key is never echoed in a refusal; the timeout stays below the deadline; the API URL is scheme, host and port', () => {
    expect(() => loadConfig({ STRIPE_SECRET_KEY: 'sk_live_but with spaces' })).toThrow(/^STRIPE_SECRET_KEY: expected a Stripe secret/);
    expect(() => loadConfig({ STRIPE_SECRET_KEY: 'sk_live_but with spaces' })).not.toThrow(/with spaces/);
    expect(() => loadConfig({ REQUEST_DEADLINE_MS: '3000', PAYMENTS_TIMEOUT_MS: '3000' })).toThrow(
      /^PAYMENTS_TIMEOUT_MS: a payment call of 3000 ms must leave 1000 ms/,
    );
    expect(() => loadConfig({ REQUEST_DEADLINE_MS: '3000', PAYMENTS_TIMEOUT_MS: '2001' })).toThrow(/^PAYMENTS_TIMEOUT_MS: a payment call/);
    expect(loadConfig({ REQUEST_DEADLINE_MS: '3000', PAYMENTS_TIMEOUT_MS: '2000' }).payments.timeoutMs).toBe(2000);
    expect(() => loadConfig({ PAYMENTS_TIMEOUT_MS: '150' })).toThrow(/^PAYMENTS_TIMEOUT_MS: /);
    expect(loadConfig({ REQUEST_DEADLINE_MS: '3000' }).payments.timeoutMs).toBe(1500);
    // A deadline too short for any call: refused only where a real provider would be asked.
    expect(() => loadConfig({ REQUEST_DEADLINE_MS: '1000', STRIPE_SECRET_KEY: 'sk_test_abc' })).toThrow(
      /^REQUEST_DEADLINE_MS: a payment call/,
    );
    expect(loadConfig({ REQUEST_DEADLINE_MS: '1000' }).payments.timeoutMs).toBe(200);
    expect(loadConfig({}).payments).toMatchObject({
      secretKey: null,
      apiUrl: 'https://api.stripe.com',
      timeoutMs: 5000,
      reconcileForMs: 23 * 3_600_000,
    });
    expect(loadConfig({ STRIPE_API_URL: 'http://127.0.0.1:12111/' }).payments.apiUrl).toBe('http://127.0.0.1:12111');
  });

  it('EMBEDDED_PG_DATA_DIR becomes an absolute path', () => {
    expect(loadConfig({ EMBEDDED_PG_DATA_DIR: 'some/where' }).embeddedPostgres.dataDir).toBe(`${process.cwd()}/some/where`);
  });

  it('OTEL_TRACES_EXPORTER picks the exporters as the OpenTelemetry SDKs read it', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    const tracingOf = (env: Record<string, string>) => {
      const { tracesEndpoint, console } = loadConfig(env).tracing;
      return { tracesEndpoint, console };
    };
    expect(tracingOf({})).toEqual({ tracesEndpoint: null, console: false });
    expect(tracingOf(endpoint)).toEqual({ tracesEndpoint: 'http://collector:4318/v1/traces', console: false });
    expect(tracingOf({ OTEL_TRACES_EXPORTER: 'console' })).toEqual({ tracesEndpoint: null, console: true });
    expect(tracingOf({ ...endpoint, OTEL_TRACES_EXPORTER: 'console, otlp' })).toEqual({
      tracesEndpoint: 'http://collector:4318/v1/traces',
      console: true,
    });
    expect(tracingOf({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual({ tracesEndpoint: 'http://localhost:4318/v1/traces', console: false });
    expect(tracingOf({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toEqual({ tracesEndpoint: null, console: false });
    expect(() => loadConfig({ OTEL_TRACES_EXPORTER: 'none,console' })).toThrow(/^OTEL_TRACES_EXPORTER: /);
  });

  it('TRACES_EXCLUDED_PATHS: probes and scrapes by default, a list, or none', () => {
    expect(loadConfig({}).tracing.excludedPaths).toEqual(['/health', '/ready', '/metrics']);
    expect(loadConfig({ TRACES_EXCLUDED_PATHS: '/health, /internal/ping' }).tracing.excludedPaths).toEqual(['/health', '/internal/ping']);
    expect(loadConfig({ TRACES_EXCLUDED_PATHS: 'none' }).tracing.excludedPaths).toEqual([]);
    expect(() => loadConfig({ TRACES_EXCLUDED_PATHS: '/health,ready' })).toThrow(/^TRACES_EXCLUDED_PATHS: .*"ready"/);
  });
});
