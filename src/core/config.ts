/**
 * Environment -> typed configuration. Every value is checked once at start-up; a wrong value stops
 * the process with a message that names the variable, so a typo never surfaces later as a hang or
 * a silent default. Each variable is one entry of src/core/config-table.ts; what spans variables is
 * checked here, by the functions below.
 */
import { ConfigError } from './config-error.js';
import { DEVELOPMENT_ENVIRONMENTS, Known, readGroup, type Env, type Values } from './config-kinds.js';
import type { AppConfig, IdentityConfig, PaymentsConfig, ProcessConfig, TracingConfig, MigrationConfig } from './config-shape.js';
import {
  CONFIG_TABLE,
  DEFAULT_OTLP_TRACES_ENDPOINT,
  MIGRATION_DEFAULTS as MIGRATION_TABLE_DEFAULTS,
  PAYMENT_RECORD_MARGIN_MS,
} from './config-table.js';

export { ConfigError };
export type * from './config-shape.js';
export type { JwtConfig } from './jwt-config.js';
export { parseDuration } from './config-kinds.js';
export {
  DEFAULT_OTLP_TRACES_ENDPOINT,
  LOG_LEVELS,
  PAYMENT_CALL_MIN_MS,
  PAYMENT_RECORD_MARGIN_MS,
  STRIPE_API_URL,
  STRIPE_KEY_KEPT_MS,
} from './config-table.js';

/** The migrator's settings when nothing configures them (a test's template, a tool). */
export const MIGRATION_DEFAULTS: MigrationConfig = MIGRATION_TABLE_DEFAULTS;

export interface LoadOptions {
  /**
   * Whether the process answers HTTP. Only a server must prove who its callers are outside
   * development; the worker and the command-line tools take no requests.
   */
  servesHttp?: boolean;
}

/** Outside development a server must prove who its callers are: dev mode trusts anyone's headers. */
function requireIdentity(identity: IdentityConfig, nodeEnv: string, servesHttp: boolean): void {
  const development = DEVELOPMENT_ENVIRONMENTS.includes(nodeEnv);
  if (servesHttp && !development && identity.actionSecret === null && identity.jwt === null) {
    throw new ConfigError(
      'ACTION_SECRET',
      `NODE_ENV=${nodeEnv} needs ACTION_SECRET or JWT_SECRET: dev mode, which trusts x-hasura-* headers from anyone, runs only with NODE_ENV unset, development or test`,
    );
  }
}

/**
 * A call that does not fit would never be sent by a request (too little of its deadline left):
 * only the reconciler would charge, a minute later. Refused where it was asked for: an explicit
 * timeout, or a deadline that leaves no room while a real provider is configured.
 */
function requirePaymentCallFitsDeadline(env: Env, payments: PaymentsConfig, deadlineMs: number): void {
  const asked = env['PAYMENTS_TIMEOUT_MS'] !== undefined;
  if (payments.timeoutMs + PAYMENT_RECORD_MARGIN_MS > deadlineMs && (asked || payments.secretKey !== null)) {
    throw new ConfigError(
      asked ? 'PAYMENTS_TIMEOUT_MS' : 'REQUEST_DEADLINE_MS',
      `a payment call of ${payments.timeoutMs} ms must leave ${PAYMENT_RECORD_MARGIN_MS} ms of REQUEST_DEADLINE_MS (${deadlineMs}) ` +
        'to record its outcome in the same request',
    );
  }
}

/**
 * The OTel variables as the SDKs define them: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the traces URL
 * itself; OTEL_EXPORTER_OTLP_ENDPOINT is a base to which /v1/traces is added. OTEL_TRACES_EXPORTER
 * unset: OTLP when an endpoint is set, else nothing.
 */
function tracingOf(values: Values<typeof CONFIG_TABLE.tracing.fields>): TracingConfig {
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

/** Outside development, a relay that posts events must sign them: a receiver could not tell them from forgeries. */
function readOutbox(env: Env, known: Known): AppConfig['outbox'] {
  const outbox = readGroup(CONFIG_TABLE.outbox.fields, env, known);
  if (outbox.webhookUrl !== null && outbox.webhookSecret === null && !known.development()) {
    throw new ConfigError(
      'NOTIFY_WEBHOOK_SECRET',
      `NODE_ENV=${known.nodeEnv()} with NOTIFY_WEBHOOK_URL needs NOTIFY_WEBHOOK_SECRET: the relay refuses to post events a receiver cannot verify`,
    );
  }
  if (outbox.webhookPreviousSecret !== null && outbox.webhookSecret === null) {
    throw new ConfigError('NOTIFY_WEBHOOK_SECRET_PREVIOUS', 'is the secret being replaced: set NOTIFY_WEBHOOK_SECRET to the new one');
  }
  return outbox;
}

function readPayments(env: Env, known: Known, deadlineMs: number): PaymentsConfig {
  const payments = readGroup(CONFIG_TABLE.payments.fields, env, known);
  requirePaymentCallFitsDeadline(env, payments, deadlineMs);
  return payments;
}

export function loadConfig(env: Env = process.env, { servesHttp = true }: LoadOptions = {}): AppConfig {
  const known = new Known();
  const t = CONFIG_TABLE;
  known.remember('NODE_ENV', t.process.fields.nodeEnv.read(env, known));
  const nodeEnv = known.nodeEnv();
  // Whether this environment may run without a secret is the first thing start-up says.
  const identity = readGroup(t.identity.fields, env, known);
  requireIdentity(identity, nodeEnv, servesHttp);
  const processConfig: ProcessConfig = { ...readGroup(t.process.fields, env, known), development: known.development() };
  const database = readGroup(t.database.fields, env, known);
  const requests = readGroup(t.requests.fields, env, known);
  return {
    process: processConfig,
    server: readGroup(t.server.fields, env, known),
    database,
    embeddedPostgres: readGroup(t.embeddedPostgres.fields, env, known),
    requests,
    identity,
    coupons: readGroup(t.coupons.fields, env, known),
    idempotency: readGroup(t.idempotency.fields, env, known),
    outbox: readOutbox(env, known),
    payments: readPayments(env, known, requests.deadlineMs),
    huddles: readGroup(t.huddles.fields, env, known),
    retention: readGroup(t.retention.fields, env, known),
    migrations: readGroup(t.migrations.fields, env, known),
    shutdown: readGroup(t.shutdown.fields, env, known),
    edge: readGroup(t.edge.fields, env, known),
    tracing: tracingOf(readGroup(t.tracing.fields, env, known)),
  };
}

/** Dev mode trusts x-hasura-* headers as sent; only a configuration with no secret and no JWT key. */
export function isDevMode({ identity }: Pick<AppConfig, 'identity'>): boolean {
  return identity.actionSecret === null && identity.jwt === null;
}
