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
import type { Logger } from '../logger.js';
import { inSpan, SpanKind, traceparentOf, tracing } from '../tracing.js';
import { createGuardedPool, currentTransactionTimeouts, type GuardedPool, type PoolOptions } from './pool.js';
import { preparedNameOf } from './prepared.js';
import type { DB } from './schema.js';

/** The root Kysely instance over the guarded pool: what the transaction runner opens transactions on. */
export type RootPool = Kysely<DB>;

export interface Database {
  /** The root instance: reads outside a transaction, and the runner that opens transactions. */
  db: Kysely<DB>;
  pool: GuardedPool;
  close(): Promise<void>;
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
    const timeouts = currentTransactionTimeouts();
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
}

/** A W3C traceparent, safe to write into SQL as it is. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** A statement's span name: the prepared statement's name, or the statement's first word. */
function statementName(sql: string): string {
  return preparedNameOf(sql) ?? (/^\s*(\w+)/.exec(sql)?.[1] ?? 'SQL').toUpperCase();
}

/**
 * A connection whose every statement is a span (OpenTelemetry's database conventions: the text
 * as sent, with placeholders, never the values). A lock wait shows as a long statement span.
 */
function tracedConnection(connection: DatabaseConnection): DatabaseConnection {
  const executeQuery: DatabaseConnection['executeQuery'] = (compiled) =>
    inSpan(
      statementName(compiled.sql),
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'postgresql',
          'db.system': 'postgresql',
          'db.query.text': compiled.sql,
          'db.operation.name': (/^\s*(\w+)/.exec(compiled.sql)?.[1] ?? '').toUpperCase(),
        },
      },
      () => connection.executeQuery(compiled),
    );
  return new Proxy(connection, {
    get: (target, property) => {
      if (property === 'executeQuery') return executeQuery;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

class TimedPostgresDialect extends PostgresDialect {
  constructor(private readonly settings: PostgresDialectConfig) {
    super(settings);
  }

  override createDriver(): Driver {
    return new TimedPostgresDriver(this.settings);
  }
}

export function createDatabase(options: PoolOptions & { plugins?: KyselyPlugin[] }, log: Logger): Database {
  const pool = createGuardedPool(options, log);
  const db = new Kysely<DB>({ dialect: new TimedPostgresDialect({ pool: pool.kyselyPool }), plugins: options.plugins ?? [] });
  let closed: Promise<void> | null = null;
  return {
    db,
    pool,
    close() {
      // db.destroy() only ends the pool once Kysely has used it; end the raw pool either way.
      closed ??= db.destroy().then(async () => {
        if (!pool.raw.ended) await pool.raw.end();
      });
      return closed;
    },
  };
}
