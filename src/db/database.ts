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
import { createGuardedPool, currentTransactionTimeouts, type GuardedPool, type PoolOptions } from './pool.js';
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
  override async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const timeouts = currentTransactionTimeouts();
    if (!timeouts) return super.beginTransaction(connection, settings);
    const ms = (value: number) => String(Math.max(1, Math.floor(value)));
    const isolation = settings.isolationLevel ? ` isolation level ${settings.isolationLevel}` : '';
    const access = settings.accessMode ? ` ${settings.accessMode}` : '';
    await connection.executeQuery(
      CompiledQuery.raw(
        `begin${isolation}${access}; select set_config('lock_timeout', '${ms(timeouts.lockTimeoutMs)}', true), ` +
          `set_config('statement_timeout', '${ms(timeouts.statementTimeoutMs)}', true), ` +
          `set_config('idle_in_transaction_session_timeout', '${ms(timeouts.idleInTransactionTimeoutMs)}', true)`,
      ),
    );
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
