import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppConfig } from './config.js';
import type { Clock } from './clock.js';
import { waitForDatabase } from './db/connect.js';
import { createDatabase, type Database } from './db/database.js';
import type { EmbeddedPostgres } from './db/embedded.js';
import { assertSchemaCurrent, migrate, MIGRATIONS_DIR } from './db/migrate.js';
import { applySessionTimeouts } from './db/session-defaults.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from './db/scope.js';
import { seedIfEmpty } from './db/seed.js';
import { buildServices, type Algorithms, type AppServices } from './services.js';
import { createApp, type App } from './http/app.js';
import { listen, type RunningServer } from './http/node-server.js';
import type { Logger } from './logger.js';
import { startWorkers } from './worker/index.js';
import { untraced } from './tracing.js';

export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));
export const DEFAULT_DATA_DIR = path.join(PROJECT_ROOT, '.data', 'postgres');

export interface BackendOptions {
  config: AppConfig;
  log: Logger;
  clock?: Clock;
  /** Where the embedded cluster lives when DATABASE_URL is not set. */
  dataDir?: string;
  /** Load the demo data into an empty embedded database. */
  seed?: boolean;
  /** fsync off for a throwaway embedded cluster (load tests). */
  ephemeral?: boolean;
  host?: string;
  /** Stand-ins for the original algorithms (the benchmark's peer designs). */
  algorithms?: Partial<Algorithms>;
  /** Log while the database is away (one process per server does: the one that owns it); every process checks it for /ready. */
  watchDatabase?: boolean;
}

export interface Backend {
  url: string;
  app: App;
  services: AppServices;
  database: Database;
  embedded: EmbeddedPostgres | null;
  http: RunningServer;
  /**
   * Drains HTTP (fails /ready unless `failReady` is false, keeps accepting for `graceMs`, then waits up to
   * HTTP_DRAIN_TIMEOUT_MS for every connection to end: RunningServer.drain) while the background
   * loops stop, then gives the budget leases back, closes the pools and stops the embedded
   * server: each step time-limited, so it ends whatever the database does.
   */
  stop(options?: { graceMs?: number; failReady?: boolean }): Promise<void>;
}

/**
 * The embedded PostgreSQL is a development dependency: production installs (npm ci --omit=dev)
 * have no binaries, and config refuses NODE_ENV=production without DATABASE_URL, so it is loaded
 * only when it is about to run.
 */
function loadEmbedded(): Promise<typeof import('./db/embedded.js')> {
  return import('./db/embedded.js');
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
export type SchemaPolicy = 'migrate' | 'require-current' | 'leave';

export interface OpenDatabaseOptions extends Pick<BackendOptions, 'config' | 'log' | 'dataDir' | 'ephemeral' | 'seed' | 'watchDatabase'> {
  schema: SchemaPolicy;
}

/**
 * DATABASE_URL (waited for up to DB_CONNECT_TIMEOUT_MS), or the embedded server: the server
 * creates it when missing; the tools only use one that exists (started, or attached to when
 * `npm start` already runs it).
 */
export async function openDatabase(options: OpenDatabaseOptions, applicationName: string): Promise<OpenedDatabase> {
  const { config, log } = options;
  const embedded =
    config.databaseUrl === null
      ? await (
          await loadEmbedded()
        ).startEmbeddedPostgres({
          dataDir: options.dataDir ?? config.embeddedDataDir ?? DEFAULT_DATA_DIR,
          port: config.embeddedPostgresPort,
          log,
          ephemeral: options.ephemeral ?? false,
          create: options.schema === 'migrate',
          // The server owns its database; the tools use the one a running server has.
          share: options.schema !== 'migrate',
          sharedDir: config.embeddedSharedDir ?? undefined,
        })
      : null;
  if (config.databaseUrl !== null) await waitForDatabase(config.databaseUrl, config.dbConnectTimeoutMs, log);
  const connectionString = config.databaseUrl ?? embedded!.connectionString();
  const database = createDatabase(
    {
      connectionString,
      max: config.dbPoolMax,
      acquireTimeoutMs: config.dbPoolAcquireTimeoutMs,
      connectTimeoutMs: config.dbPoolConnectTimeoutMs,
      statementTimeoutMs: config.statementTimeoutMs,
      applicationName,
      preparedStatements: config.dbPreparedStatements,
      healthCheckIntervalMs: config.dbHealthCheckIntervalMs,
      logOutages: options.watchDatabase ?? false,
    },
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
      if (options.schema === 'migrate') {
        // The runner limits its own calls by MIGRATION_STATEMENT_TIMEOUT_MS and MIGRATION_LOCK_WAIT_MS.
        const applied = await migrate(database.db, MIGRATIONS_DIR, { settings: config.migrations, log });
        log.info({ applied }, applied.length ? 'migrations applied' : 'schema is up to date');
        // What a coupon issue sent as one statement runs under (docs/design.md §5).
        await withCallLimit(LONG_WORK_LIMIT_MS, () => applySessionTimeouts(connectionString, config, log));
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

export async function startBackend(options: BackendOptions): Promise<Backend> {
  const { config, log } = options;
  const opened = await openDatabase({ ...options, seed: options.seed ?? true, schema: 'migrate' }, 'mutation-backend');
  const { database, embedded } = opened;
  try {
    const services = buildServices(config, database, log, options.clock, options.algorithms);
    const app = createApp(services);
    const http = await listen(app, config.port, log, options.host ?? config.host, config.edge);
    const workers = config.runWorkers ? startWorkers(services) : null;
    return {
      url: `http://localhost:${http.port}/graphql`,
      app,
      services,
      database,
      embedded,
      http,
      async stop({ graceMs = 0, failReady = true } = {}) {
        // The loops serve no request: they stop (WORKERS_STOP_LIMIT_MS) while HTTP drains, so a
        // shutdown takes the longer of the two, not their sum.
        await Promise.all([http.drain({ graceMs, failReady, timeoutMs: config.shutdown.drainTimeoutMs }), workers?.stop()]);
        // Requests issue from the leases until the last one is answered.
        await services.budgetLeases.stop();
        await opened.close();
      },
    };
  } catch (error) {
    await opened.close();
    throw error;
  }
}
