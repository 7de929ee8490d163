import { createDatabase, type Database } from '../../src/db/database.js';
import { migrate } from '../../src/db/migrate.js';
import { createLogger, type Logger } from '../../src/core/logger.js';

export interface ToolDatabaseOptions {
  /** Connections in its pool. */
  max?: number;
  acquireTimeoutMs?: number;
  log?: Logger;
}

/**
 * A small pool of its own beside any server's, for work done before or next to it: migrating a
 * database, adopting one, the next version's start-up. No prepared statements, so that it works
 * through PgBouncer too.
 */
export function openToolDatabase(connectionString: string, applicationName: string, options: ToolDatabaseOptions = {}): Database {
  return createDatabase(
    {
      connectionString,
      max: options.max ?? 1,
      acquireTimeoutMs: options.acquireTimeoutMs ?? 5_000,
      applicationName,
      preparedStatements: false,
    },
    options.log ?? createLogger('silent'),
  );
}

/** Brings the database at `connectionString` to the current schema, on a pool of its own that it closes. */
export async function migrateDatabaseAt(connectionString: string, options: ToolDatabaseOptions & { applicationName?: string } = {}) {
  const database = openToolDatabase(connectionString, options.applicationName ?? 'migrate', options);
  try {
    await migrate(database.db);
  } finally {
    await database.close();
  }
}
