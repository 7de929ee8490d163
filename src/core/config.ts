/**
 * Environment -> typed configuration. Every value is checked once at start-up; a wrong value stops
 * the process with a message that names the variable, so a typo never surfaces later as a hang or
 * a silent default. Each variable is declared once, in its group's file under src/core/config/
 * (name, kind, default, range, sentence), and the configuration's type is inferred from those
 * declarations. What spans variables is here, in `loadConfig`'s reading order: the checks across
 * variables and the defaults that follow another variable (their docs' default names it).
 */
import { ConfigError } from './config/error.js';
import { readGroup, readVariable, type Env, type Values } from './config/kinds.js';
import { PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS } from './config/payments.js';
import { CONFIG_TABLE } from './config/table.js';

export { ConfigError, PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS };
export type { JwtConfig } from './jwt-secret.js';
export { parseDuration } from './config/kinds.js';
export { LOG_LEVELS } from './config/process.js';

type Table = typeof CONFIG_TABLE;
/** One group's values as its variables read them: null where a default follows another variable. */
type Read<G extends keyof Table> = Values<Table[G]['fields']>;

export type AppConfig = ReturnType<typeof loadConfig>;
export type ServerConfig = AppConfig['server'];
export type TracingConfig = AppConfig['tracing'];
export type MigrationConfig = AppConfig['migrations'];

/** The migrator's settings when nothing configures them (a test's template, a tool): the variables' defaults. */
export const MIGRATION_DEFAULTS: MigrationConfig = readGroup(CONFIG_TABLE.migrations, {});

/** The environments where dev mode and the embedded PostgreSQL may run (NODE_ENV unset is development). */
const DEVELOPMENT_ENVIRONMENTS = ['development', 'test'];

/** The OTLP/HTTP traces URL the SDKs use when OTEL_TRACES_EXPORTER=otlp names no endpoint. */
const DEFAULT_OTLP_TRACES_ENDPOINT = 'http://localhost:4318/v1/traces';

export interface LoadOptions {
  /**
   * Whether the process answers HTTP. Only a server must prove who its callers are outside
   * development; the worker and the command-line tools take no requests.
   */
  servesHttp?: boolean;
}

export function loadConfig(env: Env = process.env, { servesHttp = true }: LoadOptions = {}) {
  const t = CONFIG_TABLE;
  const nodeEnv = readVariable(t.process.fields.nodeEnv, env);
  const development = DEVELOPMENT_ENVIRONMENTS.includes(nodeEnv);
  // Whether this environment may run without a secret is the first thing start-up says.
  const identity = readGroup(t.identity, env);
  requireIdentity(identity, nodeEnv, servesHttp);
  const processValues = readGroup(t.process, env);
  requireDatabaseUrl(readVariable(t.database.fields.url, env), nodeEnv, development);
  const database = readGroup(t.database, env);
  const requests = readGroup(t.requests, env);
  const server = readGroup(t.server, env);
  const embeddedPostgres = readGroup(t.embeddedPostgres, env);
  const coupons = readGroup(t.coupons, env);
  const idempotency = readGroup(t.idempotency, env);
  const outbox = outboxOf(readGroup(t.outbox, env), nodeEnv, development);
  const payments = paymentsOf(readGroup(t.payments, env), env, requests.deadlineMs);
  const huddles = readGroup(t.huddles, env);
  const retention = readGroup(t.retention, env);
  const migrations = readGroup(t.migrations, env);
  const shutdown = readGroup(t.shutdown, env);
  const edge = readGroup(t.edge, env);
  return {
    process: { ...processValues, logLevel: processValues.logLevel ?? (nodeEnv === 'test' ? 'silent' : 'info'), development },
    // Dev mode trusts x-hasura-* headers from anyone who can connect: only this machine may.
    server: { ...server, host: server.host ?? (isDevMode({ identity }) ? '127.0.0.1' : '0.0.0.0') },
    database,
    embeddedPostgres,
    requests,
    identity,
    coupons,
    idempotency,
    outbox,
    payments,
    huddles,
    retention,
    migrations,
    shutdown,
    edge: {
      ...edge,
      introspection: edge.introspection ?? development,
      corsOrigins: edge.corsOrigins ?? (development ? ['*'] : []),
      maxInFlight: edge.maxInFlight ?? database.poolMax,
    },
    tracing: tracingOf(readGroup(t.tracing, env)),
  };
}

/** Dev mode trusts x-hasura-* headers as sent; only a configuration with no secret and no JWT key. */
export function isDevMode({ identity }: { identity: Read<'identity'> }): boolean {
  return identity.actionSecret === null && identity.jwt === null;
}

/** Outside development a server must prove who its callers are: dev mode trusts anyone's headers. */
function requireIdentity(identity: Read<'identity'>, nodeEnv: string, servesHttp: boolean): void {
  if (servesHttp && !DEVELOPMENT_ENVIRONMENTS.includes(nodeEnv) && isDevMode({ identity })) {
    throw new ConfigError(
      'ACTION_SECRET',
      `NODE_ENV=${nodeEnv} needs ACTION_SECRET or JWT_SECRET: dev mode, which trusts x-hasura-* headers from anyone, runs only with NODE_ENV unset, development or test`,
    );
  }
}

/** Unset, DATABASE_URL is the embedded PostgreSQL: development and tests only. */
function requireDatabaseUrl(url: string | null, nodeEnv: string, development: boolean): void {
  if (url === null && !development) {
    throw new ConfigError(
      'DATABASE_URL',
      `NODE_ENV=${nodeEnv} needs DATABASE_URL: the embedded PostgreSQL is for development and tests (one local folder, no backups)`,
    );
  }
}

/** Outside development, a relay that posts events must sign them: a receiver could not tell them from forgeries. */
function outboxOf(outbox: Read<'outbox'>, nodeEnv: string, development: boolean) {
  if (outbox.webhookUrl !== null && outbox.webhookSecret === null && !development) {
    throw new ConfigError(
      'NOTIFY_WEBHOOK_SECRET',
      `NODE_ENV=${nodeEnv} with NOTIFY_WEBHOOK_URL needs NOTIFY_WEBHOOK_SECRET: the relay refuses to post events a receiver cannot verify`,
    );
  }
  if (outbox.webhookPreviousSecret !== null && outbox.webhookSecret === null) {
    throw new ConfigError('NOTIFY_WEBHOOK_SECRET_PREVIOUS', 'is the secret being replaced: set NOTIFY_WEBHOOK_SECRET to the new one');
  }
  return outbox;
}

/**
 * PAYMENTS_TIMEOUT_MS unset: what leaves transaction 2 its margin, at most half the deadline and
 * 5 s. A call that does not fit would never be sent by a request (too little of its deadline
 * left): only the reconciler would charge, a minute later. Refused where it was asked for: an
 * explicit timeout, or a deadline that leaves no room while a real provider is configured.
 */
function paymentsOf(read: Read<'payments'>, env: Env, deadlineMs: number) {
  const fitting = Math.max(Math.min(5_000, Math.floor(deadlineMs / 2), deadlineMs - PAYMENT_RECORD_MARGIN_MS), PAYMENT_CALL_MIN_MS);
  const payments = { ...read, timeoutMs: read.timeoutMs ?? fitting };
  const asked = env['PAYMENTS_TIMEOUT_MS'] !== undefined;
  if (payments.timeoutMs + PAYMENT_RECORD_MARGIN_MS > deadlineMs && (asked || payments.secretKey !== null)) {
    throw new ConfigError(
      asked ? 'PAYMENTS_TIMEOUT_MS' : 'REQUEST_DEADLINE_MS',
      `a payment call of ${payments.timeoutMs} ms must leave ${PAYMENT_RECORD_MARGIN_MS} ms of REQUEST_DEADLINE_MS (${deadlineMs}) ` +
        'to record its outcome in the same request',
    );
  }
  return payments;
}

/**
 * The OTel variables as the SDKs define them: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the traces URL
 * itself; OTEL_EXPORTER_OTLP_ENDPOINT is a base to which /v1/traces is added. OTEL_TRACES_EXPORTER
 * unset: OTLP when an endpoint is set, else nothing.
 */
function tracingOf(values: Read<'tracing'>) {
  const { otlpEndpoint, otlpTracesEndpoint, exporters, statementText, ...rest } = values;
  const endpoint = otlpTracesEndpoint ?? (otlpEndpoint === null ? null : `${otlpEndpoint.replace(/\/+$/, '')}/v1/traces`);
  const chosen = exporters ?? { otlp: endpoint !== null, console: false };
  return {
    ...rest,
    tracesEndpoint: chosen.otlp ? (endpoint ?? DEFAULT_OTLP_TRACES_ENDPOINT) : null,
    console: chosen.console,
    preparedStatementText: statementText === 'all',
  };
}
