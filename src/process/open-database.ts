import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppConfig } from '../core/config.js';
import { waitForDatabase } from '../db/connect.js';
import { createDatabase, type Database, type DatabaseOptions } from '../db/database.js';
import type { EmbeddedPostgres } from '../dev/embedded-postgres.js';
import { migrate } from '../db/migrate.js';
import { assertSchemaCurrent, MIGRATIONS_DIR } from '../db/migration-ledger.js';
import { applySessionTimeouts } from '../db/session-defaults.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../db/transaction-mark.js';
import { seedIfEmpty } from '../db/seed.js';
import type { Logger } from '../core/logger.js';
import { untraced } from '../core/tracing.js';
import { assertTimeZoneKnown } from '../features/coupons/period.js';

const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const DEFAULT_DATA_DIR = path.join(PROJECT_ROOT, '.data', 'postgres');

/**
 * The embedded PostgreSQL is a development dependency: production installs (npm ci --omit=dev)
 * have no binaries, and config refuses NODE_ENV=production without DATABASE_URL, so it is loaded
 * only when it is about to run.
 */
function loadEmbedded(): Promise<typeof import('../dev/embedded-postgres.js')> {
  return import('../dev/embedded-postgres.js');
}

export interface OpenedDatabase {
  database: Database;
  embedded: EmbeddedPostgres | null;
  /** Closes the pools (connections still busy after POOL_END_LIMIT_MS are cut), then stops the embedded server if this process started it. */
  close(): Promise<void>;
}

/**
 * What a process does with the schema it finds: the server migrates; the other tools work with a
 * current schema and never change it (a ledger check pointed at the wrong database must not create
 * tables there); adoption brings its own migrations.
 */
type SchemaPolicy = 'migrate' | 'require-current' | 'leave';

export interface OpenDatabaseOptions {
  config: AppConfig;
  log: Logger;
  /** Where the embedded cluster lives when DATABASE_URL is not set. */
  dataDir?: string;
  /** Load the demo data into an empty embedded database. */
  seed?: boolean;
  /** fsync off for a throwaway embedded cluster (load tests). */
  ephemeral?: boolean;
  /** Log while the database is away (one process per server does: the one that owns it); every process checks it for /ready. */
  watchDatabase?: boolean;
  schema: SchemaPolicy;
}

/** The pools' settings from the configuration (DB_POOL_*, STATEMENT_TIMEOUT_MS, DB_PREPARED_STATEMENTS, DB_HEALTH_CHECK_INTERVAL_MS). */
export function databaseOptions(config: AppConfig, connectionString: string, applicationName: string): DatabaseOptions {
  return {
    connectionString,
    max: config.database.poolMax,
    acquireTimeoutMs: config.database.poolAcquireTimeoutMs,
    connectTimeoutMs: config.database.poolConnectTimeoutMs,
    statementTimeoutMs: config.database.statementTimeoutMs,
    applicationName,
    preparedStatements: config.database.preparedStatements,
    healthCheckIntervalMs: config.database.healthCheckIntervalMs,
  };
}

/**
 * DATABASE_URL (waited for up to DB_CONNECT_TIMEOUT_MS), or the embedded server: the server
 * creates it when missing; the tools only use one that exists (started, or attached to when
 * `npm start` already runs it).
 */
export async function openDatabase(options: OpenDatabaseOptions, applicationName: string): Promise<OpenedDatabase> {
  const { config, log } = options;
  const embedded =
    config.database.url === null
      ? await (
          await loadEmbedded()
        ).startEmbeddedPostgres({
          dataDir: options.dataDir ?? config.embeddedPostgres.dataDir ?? DEFAULT_DATA_DIR,
          port: config.embeddedPostgres.port,
          log,
          ephemeral: options.ephemeral ?? false,
          create: options.schema === 'migrate',
          // The server owns its database; the tools use the one a running server has.
          share: options.schema !== 'migrate',
          sharedDir: config.embeddedPostgres.sharedDir ?? undefined,
        })
      : null;
  if (config.database.url !== null) await waitForDatabase(config.database.url, config.database.connectTimeoutMs, log);
  const connectionString = config.database.url ?? embedded!.connectionString();
  const database = createDatabase(
    { ...databaseOptions(config, connectionString, applicationName), logOutages: options.watchDatabase ?? false },
    log,
  );
  if (options.watchDatabase) database.health.start();
  const close = async () => {
    await database.close();
    await embedded?.stop();
  };
  try {
    // Start-up belongs to no request: its statements would each be a trace of their own.
    await untraced(async () => {
      if (options.schema === 'require-current') await assertSchemaCurrent(database.db);
      await withCallLimit(LONG_WORK_LIMIT_MS, () => assertTimeZoneKnown(database.db, config.coupons.businessTimeZone));
      if (options.schema === 'migrate') {
        // The migrator limits its own calls by MIGRATION_STATEMENT_TIMEOUT_MS and MIGRATION_LOCK_WAIT_MS.
        const applied = await migrate(database.db, MIGRATIONS_DIR, { settings: config.migrations, log });
        log.info({ applied }, applied.length ? 'migrations applied' : 'schema is up to date');
        // What a coupon issue sent as one statement runs under (docs/design.md §5).
        await withCallLimit(LONG_WORK_LIMIT_MS, () => applySessionTimeouts(connectionString, config.database, log));
        if (embedded && options.seed && (await withCallLimit(LONG_WORK_LIMIT_MS, () => seedIfEmpty(database.db))))
          log.info('demo data loaded');
      }
    });
    return { database, embedded, close };
  } catch (error) {
    await close();
    throw error;
  }
}
