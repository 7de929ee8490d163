/**
 * The shape of the configuration: what each part of the program is given, read from the
 * environment by src/core/config.ts through the table of src/core/config-table.ts.
 */
import type { SAMPLERS } from './config-table.js';
import type { JwtConfig } from './jwt-config.js';

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
  /** The most issues of one tenant a process runs as one statement (coalescer.ts); 1: each issue is a statement of its own. */
  issueBatchMax: number;
}

export interface IdempotencyConfig {
  ttlHours: number;
  cleanupIntervalMs: number;
}

export type Sampler = (typeof SAMPLERS)[number];

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
