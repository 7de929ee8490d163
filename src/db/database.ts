import type { Attributes } from '@opentelemetry/api';
import {
  CompiledQuery,
  Kysely,
  sql,
  PostgresDialect,
  PostgresDriver,
  type DatabaseConnection,
  type Driver,
  type KyselyPlugin,
  type PostgresDialectConfig,
  type TransactionSettings,
} from 'kysely';
import { parseDatabaseUrl, type DatabaseTarget } from '../core/database-url.js';
import type { Logger } from '../core/logger.js';
import { inSpan, SpanKind, traceparentOf, tracing } from '../core/tracing.js';
import { ConnectError, DatabasePath, type Trouble } from './client.js';
import { HEALTH_CHECK_LIMIT_MS, watchHealth, type DatabaseHealth } from './health.js';
import { createGuardedPool, POOL_END_LIMIT_MS, type GuardedPool, type PoolOptions } from './pool.js';
import { preparedNameOf } from './prepared.js';
import type { DB } from './schema.js';
import { CommitFailed, currentTransaction, withCallLimit } from './scope.js';
import { watchResources, type ResourceWatch } from './resources.js';
import { isConnectionFailure, SqlState, sqlStateOf, stopsWrites } from './sqlstate.js';

/** The root Kysely instance over the guarded pool: what the transaction runner opens transactions on. */
export type RootPool = Kysely<DB>;

export interface Database {
  /** The root instance: reads outside a transaction, and the runner that opens transactions. */
  db: Kysely<DB>;
  /**
   * The background loops' own connections (outbox relay, huddle cleanup, key expiry, lease expiry, retention, payment reconciler): one each,
   * never handed to a request, so a flood of requests cannot starve them.
   */
  background: Kysely<DB>;
  /** The requests' pool. */
  pool: GuardedPool;
  /** What /ready answers from, kept current over a connection of its own. */
  health: DatabaseHealth;
  target: DatabaseTarget;
  /** Stops the health checks and closes every pool; connections still busy after `limitMs` are cut. */
  close(limitMs?: number): Promise<void>;
}

/**
 * Opens a transaction and sets its timeouts in one round trip: `begin; select set_config(...)` as
 * one simple query. Every statement costs a round trip, and the runner's transactions are the hot
 * path. The settings are transaction-scoped (`is_local`), so a pooler in transaction mode is safe.
 */
class TimedPostgresDriver extends PostgresDriver {
  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    return tracing.enabled ? tracedConnection(connection) : connection;
  }

  override async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const timeouts = currentTransaction()?.timeouts;
    if (!timeouts) return super.beginTransaction(connection, settings);
    const ms = (value: number) => String(Math.max(1, Math.floor(value)));
    const isolation = settings.isolationLevel ? ` isolation level ${settings.isolationLevel}` : '';
    const access = settings.accessMode ? ` ${settings.accessMode}` : '';
    // The transaction's own trace context, for the rows that carry it on (the outbox's events).
    const traceparent = traceparentOf();
    const traced = traceparent && TRACEPARENT.test(traceparent) ? `, set_config('app.traceparent', '${traceparent}', true)` : '';
    await connection.executeQuery(
      CompiledQuery.raw(
        `begin${isolation}${access}; select set_config('lock_timeout', '${ms(timeouts.lockTimeoutMs)}', true), ` +
          `set_config('statement_timeout', '${ms(timeouts.statementTimeoutMs)}', true), ` +
          `set_config('idle_in_transaction_session_timeout', '${ms(timeouts.idleInTransactionTimeoutMs)}', true)${traced}`,
      ),
    );
  }

  /**
   * From here on a lost answer may hide a commit: in a runner's transaction, a failure says so by
   * its type (CommitFailed), and the runner does not retry it blindly (see transaction.ts).
   */
  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    if (!currentTransaction()) return super.commitTransaction(connection);
    try {
      await super.commitTransaction(connection);
    } catch (error) {
      throw new CommitFailed(error);
    }
  }

  /**
   * A connection that is gone (lost, or closed by its client-side limit) has nothing to roll back:
   * PostgreSQL rolls back a transaction whose connection ended. Failing here would hide the error
   * that ended the transaction behind "not queryable".
   */
  override async rollbackTransaction(connection: Parameters<PostgresDriver['rollbackTransaction']>[0]): Promise<void> {
    try {
      await super.rollbackTransaction(connection);
    } catch (error) {
      if (!isConnectionFailure(error)) throw error;
    }
  }
}

/** A W3C traceparent, safe to write into SQL as it is. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** What a statement's span carries: its name and attributes (OpenTelemetry's database conventions). */
interface StatementSpan {
  name: string;
  attributes: Attributes;
}

const operationOf = (sql: string) => (/^\s*(\w+)/.exec(sql)?.[1] ?? '').toUpperCase();

/** The span of a statement that is not a prepared one: named by its first word, with its text. */
function unpreparedSpan(sql: string): StatementSpan {
  const operation = operationOf(sql);
  return {
    name: operation || 'SQL',
    attributes: { 'db.system.name': 'postgresql', 'db.system': 'postgresql', 'db.query.text': sql, 'db.operation.name': operation },
  };
}

/**
 * A prepared statement's spans, built once each and shared by every span of it: named by the
 * statement, its name as the summary, and its text only with TRACES_STATEMENT_TEXT=all (then with
 * each run of whitespace as one space). The hot path's statements are 6 to 8 KB of indented SQL,
 * the same on every span of one name, and the collector's encoder walks every character of every
 * span's text: with it, the text was the costliest part of tracing a request.
 */
const preparedSpans = new Map<string, { named: StatementSpan; withText: StatementSpan }>();

function statementSpan(sql: string): StatementSpan {
  const name = preparedNameOf(sql);
  if (name === undefined) return unpreparedSpan(sql);
  let spans = preparedSpans.get(sql);
  if (!spans) {
    const named = {
      name,
      attributes: {
        'db.system.name': 'postgresql',
        'db.system': 'postgresql',
        'db.query.summary': name,
        'db.operation.name': operationOf(sql),
      },
    };
    const withText = { name, attributes: { ...named.attributes, 'db.query.text': sql.replace(/\s+/g, ' ').trim() } };
    preparedSpans.set(sql, (spans = { named, withText }));
  }
  return tracing.preparedStatementText ? spans.withText : spans.named;
}

/** Each connection's traced face, made once: the pool hands the same connections out again and again. */
const tracedConnections = new WeakMap<DatabaseConnection, DatabaseConnection>();

/**
 * A connection whose every statement is a span (OpenTelemetry's database conventions: the text
 * as sent, with placeholders, never the values). A lock wait shows as a long statement span.
 */
function tracedConnection(connection: DatabaseConnection): DatabaseConnection {
  let traced = tracedConnections.get(connection);
  if (traced) return traced;
  const executeQuery: DatabaseConnection['executeQuery'] = (compiled) => {
    const { name, attributes } = statementSpan(compiled.sql);
    return inSpan(name, { kind: SpanKind.CLIENT, attributes, leaf: true }, () => connection.executeQuery(compiled));
  };
  const bound = new Map<PropertyKey, unknown>();
  traced = new Proxy(connection, {
    get: (target, property) => {
      if (property === 'executeQuery') return executeQuery;
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      let method = bound.get(property);
      if (method === undefined) bound.set(property, (method = (value as (...args: unknown[]) => unknown).bind(target)));
      return method;
    },
  });
  tracedConnections.set(connection, traced);
  return traced;
}

const selectOne = (db: Kysely<DB>) => withCallLimit(HEALTH_CHECK_LIMIT_MS, () => sql`select 1`.execute(db));

/**
 * A write that needs a new page on the database's disk: a temporary table's first row extends a
 * file of its own, so it fails while the disk is full (53100), as the requests' inserts do, where a
 * `select 1` would succeed. Dropped at commit; run only during a resource episode.
 */
const writeOnePage = (db: Kysely<DB>) =>
  withCallLimit(HEALTH_CHECK_LIMIT_MS, () =>
    db.transaction().execute(async (trx) => {
      await sql`create temporary table health_write_check (filler text) on commit drop`.execute(trx);
      await sql`insert into health_write_check values (repeat('x', 100))`.execute(trx);
    }),
  );

/** PostgreSQL answered, but had no connection slot left for us (53300). */
const refusedForSlots = (error: unknown) =>
  error instanceof ConnectError && error.failures.some((failure) => failure.sqlState === SqlState.tooManyConnections);

/**
 * One health check over the health pool's connection: `select 1`, or during a resource episode a
 * write (writeOnePage), whose success ends the episode. A held connection found dead is replaced
 * once, at once, rather than counting the database down until the next check. When no new
 * connection can be had because another application holds every slot of max_connections (53300),
 * the database is up, and this server serves as long as its requests' pool holds connections: it
 * is ready if the pool holds any, since those still answer.
 */
async function checkDatabase(healthDb: Kysely<DB>, requests: GuardedPool, resources: ResourceWatch): Promise<void> {
  const probe = async () => {
    if (!resources.current()) return void (await selectOne(healthDb));
    try {
      await writeOnePage(healthDb);
    } catch (error) {
      // Still short: the episode goes on (it says so once, resources.ts) and keeps /ready at 503.
      const state = sqlStateOf(error);
      if (state !== null && stopsWrites(state)) return;
      throw error;
    }
    resources.writesWork();
  };
  try {
    try {
      await probe();
    } catch (error) {
      // Only a held connection found dead is worth a second try; a new one that failed would fail again.
      if (!isConnectionFailure(error) || error instanceof ConnectError) throw error;
      await probe();
    }
  } catch (error) {
    if (refusedForSlots(error) && !resources.current() && requests.counts.totalCount > 0) return;
    throw error;
  }
}

class TimedPostgresDialect extends PostgresDialect {
  constructor(private readonly settings: PostgresDialectConfig) {
    super(settings);
  }

  override createDriver(): Driver {
    return new TimedPostgresDriver(this.settings);
  }
}

/**
 * Connections of the background loops: one per loop (outbox relay, huddle cleanup, key expiry,
 * lease expiry, retention, payment reconciler), so they never wait for each other either.
 */
export const BACKGROUND_CONNECTIONS = 6;

export interface DatabaseOptions extends PoolOptions {
  plugins?: KyselyPlugin[];
  /** DB_HEALTH_CHECK_INTERVAL_MS. */
  healthCheckIntervalMs?: number;
  /** Log each failed health check and the recovery (one process per server does). */
  logOutages?: boolean;
}

export const DEFAULT_HEALTH_CHECK_INTERVAL_MS = 2_000;

/** During an outage every request meets the same trouble: one line of each kind per this interval says it. */
const TROUBLE_LOG_INTERVAL_MS = 1_000;

/** What went wrong on the path, in the log (host names included: the log is the operator's), at most once a second per kind. */
function logTrouble(path: DatabasePath, log: Logger) {
  const lastLogged = new Map<string, number>();
  path.on('trouble', (trouble: Trouble) => {
    // Shortages are logged once per episode (resources.ts), not once a second.
    if (trouble.kind === 'resources') return;
    const key = trouble.kind === 'host' ? `${trouble.failure.host} ${trouble.failure.kind}` : 'stall';
    const now = Date.now();
    if (now - (lastLogged.get(key) ?? 0) < TROUBLE_LOG_INTERVAL_MS) return;
    lastLogged.set(key, now);
    if (trouble.kind === 'host') {
      log.warn(
        { host: trouble.failure.host, kind: trouble.failure.kind, reason: trouble.failure.message },
        'a new database connection failed',
      );
    } else {
      log.warn(
        { limitMs: Math.round(trouble.limitMs), limit: trouble.source },
        'a database connection did not answer within its limit and was closed; connections opened before it are replaced',
      );
    }
  });
}

export function createDatabase(options: DatabaseOptions, log: Logger): Database {
  const target = parseDatabaseUrl(options.connectionString);
  // One path for every pool of the process: what one connection learns (a dead host, a stall) the others use.
  const path = new DatabasePath(target);
  logTrouble(path, log);
  const pool = createGuardedPool(options, log, path, { failFast: true });
  const backgroundPool = createGuardedPool(
    { ...options, max: BACKGROUND_CONNECTIONS, applicationName: `${options.applicationName}-background` },
    log,
    path,
    { failFast: true },
  );
  // The health check tries even while every host fails: it is what notices the database coming back,
  // on a new connection or on the one it keeps, and what it finds the requests' connections go by.
  const healthPool = createGuardedPool({ ...options, max: 1, applicationName: `${options.applicationName}-health` }, log, path, {
    failFast: false,
    answersConfirmHost: true,
  });
  const kysely = (guarded: GuardedPool, plugins: KyselyPlugin[] = []) =>
    new Kysely<DB>({ dialect: new TimedPostgresDialect({ pool: guarded.kyselyPool }), plugins });
  const db = kysely(pool, options.plugins);
  const background = kysely(backgroundPool);
  const healthDb = kysely(healthPool);
  const resources = watchResources(path, log);
  const watched = watchHealth(path, () => checkDatabase(healthDb, pool, resources), {
    intervalMs: options.healthCheckIntervalMs ?? DEFAULT_HEALTH_CHECK_INTERVAL_MS,
    log,
    logOutages: options.logOutages ?? false,
  });
  const health: DatabaseHealth = {
    ...watched,
    // Unavailable from the first failed write on, not from the next check: a load balancer should stop sending at once.
    async current() {
      const state = await watched.current();
      const episode = resources.current();
      return episode && state.available ? { available: false, reason: episode.firstMessage, downSince: episode.since } : state;
    },
    stop() {
      watched.stop();
      resources.stop();
    },
  };
  let closed: Promise<void> | null = null;
  return {
    db,
    background,
    pool,
    health,
    target,
    close(limitMs = POOL_END_LIMIT_MS) {
      closed ??= (async () => {
        health.stop();
        await Promise.all([pool, backgroundPool, healthPool].map((guarded) => guarded.end(limitMs)));
        // Marks the instances destroyed; their pools have ended already.
        await Promise.all([db, background, healthDb].map((instance) => instance.destroy().catch(() => {})));
      })();
      return closed;
    },
  };
}
