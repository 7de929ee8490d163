import cluster from 'node:cluster';
import path from 'node:path';
import { bootstrap, onShutdown, run, type StopReason } from '../process/bootstrap.js';
import { REPLACED, STOP, STOPPING, sendHeartbeats, startHttpProcesses, type StopMessage } from './http-processes.js';
import { isDevMode, type AppConfig } from '../core/config.js';
import { DEMO_HEADERS, graphiqlOptions } from '../http/graphiql.js';
import { describeDatabaseUrl } from '../db/connect.js';
import type { EmbeddedPostgres } from '../dev/embedded-postgres.js';
import type { Logger } from '../core/logger.js';
import { serveClusterScrapes } from '../services/metrics/cluster.js';
import { envFileValue } from '../process/env-file.js';
import { openDatabase } from '../process/open-database.js';
import { startBackend } from './backend.js';
import { buildServices } from '../services/services.js';
import { startWorkers } from './worker/index.js';

/** The address to open: localhost when the server listens on this machine's loopback or everywhere. */
function baseUrl(host: string, port: number): string {
  if (host === '0.0.0.0' || host === '::' || host === '127.0.0.1' || host === '::1') return `http://localhost:${port}`;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Where the data is: the embedded server's full connection string (development only), or
 * DATABASE_URL's host. db:url finds the data folder the same way, so a folder of one's own is named
 * in its command, unless the env file already names it (db:url reads that file too).
 */
function databaseLine(config: AppConfig, embedded: EmbeddedPostgres | null, envFile: string | null): string {
  const { dataDir } = config.embeddedPostgres;
  const fromEnvFile = envFileValue(envFile, 'EMBEDDED_PG_DATA_DIR');
  const dbUrlFindsIt = dataDir === null || (fromEnvFile !== null && path.resolve(fromEnvFile) === dataDir);
  const folder = dbUrlFindsIt ? '' : `EMBEDDED_PG_DATA_DIR=${dataDir} `;
  if (embedded) return `${embedded.connectionString()}   (${folder}npm run -s db:url prints it)`;
  return `${describeDatabaseUrl(config.database.url!)} (DATABASE_URL)`;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Why the server listens where it does, when only this machine can reach it. */
function listeningNote(config: AppConfig): string {
  if (!LOOPBACK.has(config.server.host)) return '';
  return isDevMode(config) ? ' (this machine only: dev mode; set HOST to change)' : ' (this machine only; set HOST to change)';
}

/** Which payment provider checkout uses, in the words of the banner and the start-up log. */
function paymentsLine(config: AppConfig): string {
  const { secretKey, apiUrl } = config.payments;
  if (secretKey !== null) return `Stripe at ${apiUrl}${secretKey.includes('_test_') ? ' (test mode key)' : ''}`;
  if (config.process.development) {
    return 'simulated (no STRIPE_SECRET_KEY): pm_card_visa pays, pm_card_chargeDeclined is declined, pm_card_threeDSecure2Required asks for 3-D Secure';
  }
  return 'none: checkout answers PAYMENTS_UNAVAILABLE until STRIPE_SECRET_KEY is set';
}

/** Prints the banner once the log lines before it are out: pino writes them asynchronously. */
function banner(log: Logger, config: AppConfig, port: number, processes: string, database: string) {
  log.flush(() => printBanner(config, port, processes, database));
}

function printBanner(config: AppConfig, port: number, processes: string, database: string) {
  const base = baseUrl(config.server.host, port);
  // Name only what this process serves: production has no GraphiQL.
  const graphql = graphiqlOptions(config) === false ? 'GraphQL:             ' : 'GraphQL and GraphiQL:';
  console.log(`
  Listening on:         ${config.server.host}:${port}${listeningNote(config)}
  ${graphql} ${base}/graphql${graphiqlOptions(config) === false ? '' : `   (GraphiQL: ${base}/graphiql)`}
  Health: ${base}/health   Ready: ${base}/ready   Metrics: ${base}/metrics${config.edge.metricsToken === null ? ' (open: no METRICS_TOKEN)' : ''}
  Hasura Actions:       POST ${base}/actions
  Database:             ${database}
  Payments:             ${paymentsLine(config)}
  HTTP processes:       ${processes}
  Background workers:   ${config.process.runWorkers ? 'running (one set: outbox relay, huddle cleanup, key expiry, retention, payment reconciler)' : 'off (RUN_WORKERS=false)'}
${isDevMode(config) ? `  Headers for GraphiQL (dev mode):\n  ${JSON.stringify(DEMO_HEADERS)}\n` : ''}`);
}

/**
 * How long a stopping server keeps accepting once /ready fails: a SIGTERM comes from an
 * orchestrator whose load balancer may still route here; Ctrl-C has nobody to wait for.
 */
function graceFor(config: AppConfig, reason: StopReason): number {
  return reason === 'SIGTERM' ? config.shutdown.graceMs : 0;
}

/** One process: the database, the HTTP server and the background workers. */
async function single(config: AppConfig, log: Logger, envFile: string | null) {
  const backend = await startBackend({ config, log, watchDatabase: true });
  banner(log, config, backend.http.port, '1', databaseLine(config, backend.embedded, envFile));
  onShutdown(log, (reason) => backend.stop({ graceMs: graceFor(config, reason) }));
  process.on('SIGHUP', () => log.warn('SIGHUP reloads the HTTP processes of WEB_CONCURRENCY > 1; a single process is restarted instead'));
}

/**
 * WEB_CONCURRENCY > 1: this primary process starts the database (embedded or DATABASE_URL),
 * migrates, loads the demo data and runs the one set of background workers; N forked processes
 * share the port and serve HTTP. SIGHUP replaces them one at a time (the rolling reload); one that
 * dies is replaced.
 */
async function primary(config: AppConfig, log: Logger, envFile: string | null) {
  const opened = await openDatabase({ config, log, seed: true, schema: 'migrate', watchDatabase: true }, 'mutation-backend-primary');
  const databaseUrl = config.database.url ?? opened.embedded!.connectionString();
  const workers = config.process.runWorkers ? startWorkers(buildServices(config, opened.database, log)) : null;
  serveClusterScrapes(log);
  let listening = 0;
  cluster.on('listening', (_worker, address) => {
    if (++listening === config.process.webConcurrency)
      banner(
        log,
        config,
        address.port,
        `${config.process.webConcurrency} (node:cluster, one port)`,
        databaseLine(config, opened.embedded, envFile),
      );
  });
  const processes = startHttpProcesses({
    count: config.process.webConcurrency,
    env: { DATABASE_URL: databaseUrl, RUN_WORKERS: 'false' },
    log,
    drainTimeoutMs: config.shutdown.drainTimeoutMs,
    heartbeatTimeoutMs: config.process.httpHeartbeatTimeoutMs,
  });
  process.on('SIGHUP', () => void processes.reload());
  onShutdown(log, async (reason) => {
    // The loops serve no request: they stop while the HTTP processes drain.
    await Promise.all([processes.stop(reason === 'SIGTERM'), workers?.stop()]);
    await opened.close();
  });
}

/** A forked HTTP process: the database, the background workers and the reload are the primary's. */
async function httpWorker(config: AppConfig, log: Logger) {
  sendHeartbeats(config.process.httpHeartbeatTimeoutMs);
  const backend = await startBackend({ config, log, seed: false });
  let graceful = false;
  const shutdown = onShutdown(log, (reason) => {
    // A SIGTERM to this process alone (the primary's stop is a message): the primary starts its
    // successor now, and nothing routes to this one process by /ready, so no grace period.
    if (reason === 'SIGTERM') process.send?.(STOPPING);
    // Replaced, or stopped alone: the server as a whole stays ready, and a health check that
    // reaches this process meanwhile must not say otherwise.
    const alone = reason === 'replaced' || reason === 'SIGTERM';
    return backend.stop({ graceMs: reason === 'instance' && graceful ? config.shutdown.graceMs : 0, failReady: !alone });
  });
  process.on('message', (message: unknown) => {
    const type = (message as { type?: unknown } | null)?.type;
    if (type === REPLACED.type) shutdown('replaced');
    if (type === STOP) {
      graceful = (message as StopMessage).graceful;
      shutdown('instance');
    }
  });
  // A hang-up of the terminal reaches the whole process group; the primary decides what it means.
  process.on('SIGHUP', () => undefined);
}

run(async () => {
  const { config, log, envFile } = bootstrap();
  if (cluster.isWorker) return httpWorker(config, log);
  if (envFile) log.info({ envFile }, 'settings read from the env file (variables set in the environment win)');
  if (isDevMode(config)) {
    log.warn('dev mode: no ACTION_SECRET and no JWT_SECRET, so x-hasura-* headers are trusted as sent');
  }
  if (config.payments.secretKey === null) {
    if (config.process.development) log.warn(`payments: ${paymentsLine(config)}; set STRIPE_SECRET_KEY to use Stripe`);
    else log.error(`payments: STRIPE_SECRET_KEY is not set, so checkout is refused (PAYMENTS_UNAVAILABLE) and nobody is charged`);
  }
  if (!config.process.development && config.edge.metricsToken === null) {
    log.warn(
      { host: config.server.host },
      'METRICS_TOKEN is not set: /metrics answers anyone who can reach this server; set it, or keep /metrics off the public network',
    );
  }
  return config.process.webConcurrency > 1 ? primary(config, log, envFile) : single(config, log, envFile);
});
