import {
  CompiledQuery,
  Kysely,
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
import { traceparentOf, tracing } from '../core/tracing.js';
import { DatabasePath, type Trouble } from './client.js';
import { watchDatabaseHealth, type DatabaseHealth } from './health.js';
import { createGuardedPool, POOL_END_LIMIT_MS, type GuardedPool, type PoolOptions } from './pool.js';
import type { DB } from './schema.js';
import { CommitFailed, currentTransaction } from './transaction-mark.js';
import { watchResources } from './resources.js';
import { isConnectionFailure } from './sqlstate.js';
import { tracedConnection } from './statement-spans.js';

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

/** A W3C traceparent, safe to write into SQL as it is. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * Opens a transaction and sets its timeouts in one round trip: `begin; select set_config(...)` as
 * one simple query. Every statement costs a round trip, and the runner's transactions are the hot
 * path. The settings are transaction-level (`is_local`), so a pooler in transaction mode is safe.
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
const BACKGROUND_CONNECTIONS = 6;

export interface DatabaseOptions extends PoolOptions {
  plugins?: KyselyPlugin[];
  /** DB_HEALTH_CHECK_INTERVAL_MS. */
  healthCheckIntervalMs?: number;
  /** Log each failed health check and the recovery (one process per server does). */
  logOutages?: boolean;
}

const DEFAULT_HEALTH_CHECK_INTERVAL_MS = 2_000;

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
  const health = watchDatabaseHealth(
    path,
    { healthDb, requests: pool, resources },
    {
      intervalMs: options.healthCheckIntervalMs ?? DEFAULT_HEALTH_CHECK_INTERVAL_MS,
      log,
      logOutages: options.logOutages ?? false,
    },
  );
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
