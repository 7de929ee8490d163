import cluster from 'node:cluster';
import { bootstrap, onShutdown, run } from './cli/bootstrap.js';
import { isDevMode, type AppConfig } from './config.js';
import { DEMO_HEADERS, graphiqlOptions } from './http/graphiql.js';
import { describeDatabaseUrl } from './db/connect.js';
import type { EmbeddedPostgres } from './db/embedded.js';
import type { Logger } from './logger.js';
import { serveClusterScrapes } from './metrics/cluster.js';
import { openDatabase, startBackend } from './server.js';
import { buildServices } from './services.js';
import { startWorkers } from './worker/index.js';

/** The address to open: localhost when the server listens on this machine's loopback or everywhere. */
function baseUrl(host: string, port: number): string {
  if (host === '0.0.0.0' || host === '::' || host === '127.0.0.1' || host === '::1') return `http://localhost:${port}`;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Where the data is: the embedded server's full connection string (development only), or DATABASE_URL's host. */
function databaseLine(config: AppConfig, embedded: EmbeddedPostgres | null): string {
  // db:url finds the data folder the same way: a folder of one's own must be named to it too.
  const folder = config.embeddedDataDir === null ? '' : `EMBEDDED_PG_DATA_DIR=${config.embeddedDataDir} `;
  if (embedded) return `${embedded.connectionString()}   (${folder}npm run -s db:url prints it)`;
  return `${describeDatabaseUrl(config.databaseUrl!)} (DATABASE_URL)`;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Why the server listens where it does, when only this machine can reach it. */
function listeningNote(config: AppConfig): string {
  if (!LOOPBACK.has(config.host)) return '';
  return isDevMode(config) ? ' (this machine only: dev mode; set HOST to change)' : ' (this machine only; set HOST to change)';
}

/** Prints the banner once the log lines before it are out: pino writes them asynchronously. */
function banner(log: Logger, config: AppConfig, port: number, processes: string, database: string) {
  log.flush(() => printBanner(config, port, processes, database));
}

function printBanner(config: AppConfig, port: number, processes: string, database: string) {
  const base = baseUrl(config.host, port);
  // Name only what this process serves: production has no GraphiQL.
  const graphql = graphiqlOptions(config) === false ? 'GraphQL:             ' : 'GraphQL and GraphiQL:';
  console.log(`
  Listening on:         ${config.host}:${port}${listeningNote(config)}
  ${graphql} ${base}/graphql
  Health: ${base}/health   Ready: ${base}/ready   Metrics: ${base}/metrics${config.edge.metricsToken === null ? ' (open: no METRICS_TOKEN)' : ''}
  Hasura Actions:       POST ${base}/actions
  Database:             ${database}
  HTTP processes:       ${processes}
  Background workers:   ${config.runWorkers ? 'running (one set: outbox relay, huddle cleanup, key expiry)' : 'off (RUN_WORKERS=false)'}
${isDevMode(config) ? `  Headers for GraphiQL (dev mode):\n  ${JSON.stringify(DEMO_HEADERS)}\n` : ''}`);
}

/** One process: the database, the HTTP server and the background workers. */
async function single(config: AppConfig, log: Logger) {
  const backend = await startBackend({ config, log, watchDatabase: true });
  banner(log, config, backend.http.port, '1', databaseLine(config, backend.embedded));
  onShutdown(log, () => backend.stop());
}

/**
 * WEB_CONCURRENCY > 1: this primary process starts the database (embedded or DATABASE_URL),
 * migrates, loads the demo data and runs the one set of background workers; N forked processes
 * share the port and serve HTTP. A process that dies is replaced.
 */
async function primary(config: AppConfig, log: Logger) {
  const opened = await openDatabase({ config, log, seed: true, schema: 'migrate', watchDatabase: true }, 'mutation-backend-primary');
  const databaseUrl = config.databaseUrl ?? opened.embedded!.connectionString();
  const workers = config.runWorkers ? startWorkers(buildServices(config, opened.database, log)) : null;
  serveClusterScrapes(log);
  let stopping = false;
  const fork = () => cluster.fork({ DATABASE_URL: databaseUrl, RUN_WORKERS: 'false' });
  let listening = 0;
  cluster.on('listening', (_worker, address) => {
    if (++listening === config.webConcurrency)
      banner(log, config, address.port, `${config.webConcurrency} (node:cluster, one port)`, databaseLine(config, opened.embedded));
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    log.error({ pid: worker.process.pid, code, signal }, 'an HTTP process died; starting another');
    fork();
  });
  for (let i = 0; i < config.webConcurrency; i++) fork();
  onShutdown(log, async () => {
    stopping = true;
    const exits = Object.values(cluster.workers ?? {}).map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (!worker || worker.isDead()) return resolve();
          worker.once('exit', () => resolve());
          worker.process.kill('SIGTERM');
        }),
    );
    await Promise.all(exits);
    await workers?.stop();
    await opened.close();
  });
}

/** A forked HTTP process: the database is the primary's, the background workers are the primary's. */
async function httpWorker(config: AppConfig, log: Logger) {
  const backend = await startBackend({ config, log, seed: false });
  onShutdown(log, () => backend.stop());
}

run(async () => {
  const { config, log, envFile } = bootstrap();
  if (cluster.isWorker) return httpWorker(config, log);
  if (envFile) log.info({ envFile }, 'settings read from the env file (variables set in the environment win)');
  if (isDevMode(config)) {
    log.warn('dev mode: no ACTION_SECRET and no JWT_SECRET, so x-hasura-* headers are trusted as sent');
  }
  if (!config.development && config.edge.metricsToken === null) {
    log.warn(
      { host: config.host },
      'METRICS_TOKEN is not set: /metrics answers anyone who can reach this server; set it, or keep /metrics off the public network',
    );
  }
  return config.webConcurrency > 1 ? primary(config, log) : single(config, log);
});
