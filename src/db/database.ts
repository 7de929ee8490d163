import { Kysely, PostgresDialect } from 'kysely';
import type { Logger } from '../logger.js';
import { createGuardedPool, type GuardedPool, type PoolOptions } from './pool.js';
import type { DB } from './schema.js';

export interface Database {
  /** The root instance: reads outside a transaction, and the runner that opens transactions. */
  db: Kysely<DB>;
  pool: GuardedPool;
  close(): Promise<void>;
}

export function createDatabase(options: PoolOptions, log: Logger): Database {
  const pool = createGuardedPool(options, log);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool.kyselyPool }) });
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
