import type { Clock } from '../core/clock.js';
import { untraced } from '../core/tracing.js';
import type { Database } from '../db/database.js';
import type { EmbeddedPostgres } from '../dev/embedded-postgres.js';
import { buildServices, type AppServices, type StandIns } from '../services/services.js';
import { createApp, type App } from '../http/app.js';
import { listen, type RunningServer } from '../http/node-server.js';
import { openDatabase, type OpenDatabaseOptions } from '../process/open-database.js';
import { startWorkers } from './worker/index.js';

/** How the database is opened (`OpenDatabaseOptions`, with the schema migrated), and what the server adds. */
export interface BackendOptions extends Omit<OpenDatabaseOptions, 'schema'> {
  clock?: Clock;
  host?: string;
  /** Stand-ins for the product's parts (the benchmark's peer designs), by name. */
  standIns?: StandIns;
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

export async function startBackend(options: BackendOptions): Promise<Backend> {
  const { config, log } = options;
  const opened = await openDatabase({ ...options, seed: options.seed ?? true, schema: 'migrate' }, 'mutation-backend');
  const { database, embedded } = opened;
  try {
    const services = buildServices(config, database, log, options.clock, options.standIns);
    const app = createApp(services);
    // Listens only once the first health check is in: a process the cluster starts in a rolling
    // reload takes connections at once, and its /ready must not answer "not checked yet" (503)
    // while the server as a whole is ready. The check is bounded (HEALTH_CHECK_LIMIT_MS), and
    // belongs to no request: neither it nor the checks it schedules is a trace.
    await untraced(() => database.health.current());
    const http = await listen(app, config.server.port, log, options.host ?? config.server.host, config.server);
    const workers = config.process.runWorkers ? startWorkers(services) : null;
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
