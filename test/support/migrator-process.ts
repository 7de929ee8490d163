// Start-up's migrate step as a process of its own, for tests that kill it (kill -9 reaches this
// process itself: run it as `node --import tsx`, not through the tsx wrapper, which would leave it
// running). Configured as the server is (DATABASE_URL, MIGRATION_*). With the argument `naive`, the
// migrator of test/naive/migrate.ts instead. Prints the server's log lines; exit 1 on an error.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/core/config.js';
import { createDatabase } from '../../src/db/database.js';
import { MIGRATIONS_DIR } from '../../src/db/migration-ledger.js';
import { createLogger } from '../../src/core/logger.js';
import { databaseOptions, openDatabase } from '../../src/process/open-database.js';
import { migrateTakingInvalidIndexesForOthers } from '../naive/migrate.js';

export const MIGRATOR_PROCESS_APP = 'migrator-process';

async function main(): Promise<void> {
  const config = loadConfig(process.env, { servesHttp: false });
  const log = createLogger('info');
  if (process.argv[2] === 'naive') {
    const database = createDatabase(databaseOptions(config, config.database.url!, MIGRATOR_PROCESS_APP), log);
    try {
      const applied = await migrateTakingInvalidIndexesForOthers(database.db, MIGRATIONS_DIR, config.migrations.lockTimeoutMs);
      log.info({ applied }, applied.length ? 'migrations applied' : 'schema is up to date');
    } finally {
      await database.close();
    }
    return;
  }
  const opened = await openDatabase({ config, log, schema: 'migrate' }, MIGRATOR_PROCESS_APP);
  await opened.close();
}

// Imported by the test for its application name, run as a process by it.
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
      process.exit(1);
    },
  );
}
