import { execFileSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppConfig } from '../../src/core/config.js';
import pg from 'pg';
import { parseDatabaseUrl } from '../../src/core/database-url.js';
import { clientClass, ConnectError, DatabasePath } from '../../src/db/client.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/dev/embedded-postgres.js';
import { createLogger } from '../../src/core/logger.js';
import { listenOnLoopback } from '../support/ports.js';
import { spawnRecorded } from '../support/processes.js';
import { throughProxy } from './delay-proxy.js';

const PROJECT = fileURLToPath(new URL('../..', import.meta.url));

/** A fresh embedded PostgreSQL in a temporary folder, with PostgreSQL's default durability. */
export async function startScratchDatabase(): Promise<{
  postgres: EmbeddedPostgres;
  databaseUrl: string;
  dataDir: string;
  stop(): Promise<void>;
}> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-load-'));
  await chmod(root, 0o755);
  const postgres = await startEmbeddedPostgres({ dataDir: path.join(root, 'data'), port: 0, log: createLogger('warn') });
  return {
    postgres,
    databaseUrl: postgres.connectionString('postgres'),
    dataDir: path.join(root, 'data'),
    async stop() {
      await postgres.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}

/**
 * A pg pool for the load tool's own SQL (the invariant checks) that takes any DATABASE_URL the
 * server takes, a multi-host one with target_session_attrs included: after a failover the
 * checks then run on the new primary.
 */
export function sqlPool(databaseUrl: string, max = 2): pg.Pool {
  const path = new DatabasePath(parseDatabaseUrl(databaseUrl));
  const { Client } = clientClass({
    path,
    connectTimeoutMs: 10_000,
    statementTimeoutMs: 60_000,
    preparedStatements: false,
    stallsEvict: false,
  });
  return new PrimaryPool({ max, Client }, path.hosts.length);
}

type ConnectCallback = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

/** pg's pool opens a connection on one host; this one tries the next host after each that fails (pool.query included). */
class PrimaryPool extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly hosts: number,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    const attempt = async (): Promise<pg.PoolClient> => {
      for (let tried = 1; ; tried++) {
        try {
          return await super.connect();
        } catch (error) {
          if (!(error instanceof ConnectError) || tried >= this.hosts) throw error;
        }
      }
    };
    if (!callback) return attempt();
    attempt().then(
      (client) => callback(undefined, client, (release) => client.release(release as Error | undefined)),
      (error: Error) => callback(error, undefined, () => {}),
    );
  }
}

export interface ServerProcess {
  url: string;
  metricsUrl: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

interface ChildOfOurs {
  child: ChildProcess;
  /** The first match of `ready` in what it printed. */
  ready: RegExpMatchArray;
  stop(): Promise<void>;
}

/** A bound for a start that never says it is ready: minutes on a busy machine, not the test's whole timeout. */
const START_TIMEOUT_MS = 180_000;

/** One of the project's entry points (TypeScript, or compiled to dist/) as its own process, once it prints `ready`. */
async function startProcess(
  entry: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  cwd = PROJECT,
  nodeArgs: string[] = [],
): Promise<ChildOfOurs> {
  // A compiled entry (dist/…js) runs on node alone, as in production.
  const child = spawnRecorded(process.execPath, [...nodeArgs, ...(entry.endsWith('.ts') ? ['--import', 'tsx'] : []), entry, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const deadline = Date.now() + START_TIMEOUT_MS;
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setInterval(() => {
      const found = output.match(ready);
      if (found) {
        clearInterval(timer);
        resolve(found);
      } else if (child.exitCode !== null || Date.now() > deadline) {
        clearInterval(timer);
        if (child.exitCode === null) child.kill('SIGKILL');
        reject(
          new Error(
            `${entry} ${child.exitCode === null ? `printed no ${ready} within ${START_TIMEOUT_MS} ms` : 'exited'} during start-up:\n${output}`,
          ),
        );
      }
    }, 50);
  });
  return {
    child,
    ready: match,
    async stop() {
      // A process the bench stopped (SIGSTOP, process-groups.ts) acts on SIGTERM only once it is continued.
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The variables a server process started here runs with: this process's, then the defaults, then `env`. */
export function serverProcessEnv(env: Record<string, string>, port: number): Record<string, string> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return { ...inherited, LOG_LEVEL: 'warn', NODE_ENV: 'development', ...env, PORT: String(port) };
}

/**
 * What the load tool's own server is: its mode and the settings that bound its throughput, read
 * with the configuration it starts with. `npm run load`'s server is a development server, not
 * the benchmark's: the figures compare with other load runs, not with docs/benchmarks.md.
 */
export function describeOwnServer(config: AppConfig, databaseNote: string): Record<string, string> {
  return {
    mode:
      `${config.process.nodeEnv} (NODE_ENV=${config.process.nodeEnv}${config.process.development ? ": GraphQL's and Yoga's development checks on" : ''}), run from source by tsx, the TypeScript loader, ` +
      `with the background workers ${config.process.runWorkers ? 'running' : 'off'}: not comparable with the benchmark's servers (NODE_ENV=production, workers off)`,
    'HTTP processes': `${config.process.webConcurrency} (WEB_CONCURRENCY)`,
    'pool size': `${config.database.poolMax} connections (DB_POOL_MAX)`,
    'in-flight limit': `${config.edge.maxInFlight} operations (MAX_IN_FLIGHT)`,
    'pool wait': `${config.database.poolAcquireTimeoutMs} ms (DB_POOL_ACQUIRE_TIMEOUT_MS)`,
    'request deadline': `${config.requests.deadlineMs} ms (REQUEST_DEADLINE_MS)`,
    'prepared statements': `${config.database.preparedStatements ? 'on' : 'off'} (DB_PREPARED_STATEMENTS)`,
    database: databaseNote,
  };
}

/** A server given by URL: the tool knows nothing of how it runs. */
export function describeGivenServer(url: string): Record<string, string> {
  return { mode: `the server at ${url}, not started by this tool: its mode and settings (pool, in-flight limit) are not known here` };
}

/** The 1, 5 and 15 minute load averages, and the cores they compare with. */
export function machineLoadNow(): { cores: number; averages: number[] } {
  return { cores: os.cpus().length, averages: os.loadavg() };
}

/** The shared secret the bench's servers are given, and its load sends with the x-hasura-* headers. */
export const BENCH_ACTION_SECRET = 'bench-only-action-secret-0123456789';

/**
 * How the bench runs a server: as in production (NODE_ENV=production: GraphQL's and Yoga's
 * development checks off), workers off, with the coupon strategy named (test/load/strategies.ts).
 */
export function benchServerEnv(databaseUrl: string, strategy: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    BENCH_STRATEGY: strategy,
    RUN_WORKERS: 'false',
    NODE_ENV: 'production',
    ACTION_SECRET: BENCH_ACTION_SECRET,
    // One statement per issue: the rows marked batched start their servers with batching on.
    COUPON_ISSUE_BATCH_MAX: '1',
  };
}

/**
 * What a server process prints once it listens, with the port it got (PORT=0): the project's
 * banner, the test entries' first line (bench-server.ts, checkout-server.ts), the bare server's.
 */
export const SERVER_READY =
  /Listening on: +\S*:(\d+)\s|GraphQL and GraphiQL: http:\/\/[\w.]+:(\d+)\/|bare node:http server: http:\/\/127\.0\.0\.1:(\d+)\//;

export interface ServerProcessOptions {
  /** Another checkout to run it from (the bench's baseline). */
  project?: string;
  /** Options for node itself, before the entry (`--cpu-prof`: NODE_OPTIONS refuses it). */
  nodeArgs?: string[];
  /**
   * Run on the server once it listens, before it is handed over (the bench's warm-up). When it
   * fails, the server is stopped before the error goes on: the caller never got the process, so
   * nothing else would stop it, and it would outlive the run that started it.
   */
  warmUp?: (server: ServerProcess) => Promise<void>;
}

/**
 * The server as its own process, the way it runs in production: the load generator then measures
 * it from outside instead of sharing its event loop.
 */
export async function startServerProcess(
  entry: string,
  env: Record<string, string>,
  { project = PROJECT, nodeArgs = [], warmUp }: ServerProcessOptions = {},
): Promise<ServerProcess> {
  const started = await startProcess(entry, [], serverProcessEnv(env, 0), SERVER_READY, project, nodeArgs);
  const base = `http://127.0.0.1:${started.ready.slice(1).find(Boolean)}`;
  const server = { url: `${base}/graphql`, metricsUrl: `${base}/metrics`, child: started.child, stop: started.stop };
  try {
    await warmUp?.(server);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server;
}

/**
 * The delay proxy in front of `databaseUrl` as its own process, so that the load generator's busy
 * event loop cannot hold its deliveries back; the URL to connect through it.
 */
export async function startDelayProxyProcess(
  databaseUrl: string,
  delayMs: number,
): Promise<{ databaseUrl: string; pid: number; stop(): Promise<void> }> {
  const target = new URL(databaseUrl);
  const started = await startProcess(
    'test/load/delay-proxy.ts',
    ['--target', `${target.hostname}:${target.port}`, '--delay-ms', String(delayMs)],
    {},
    /listening on (\d+)/,
  );
  return { databaseUrl: throughProxy(databaseUrl, Number(started.ready[1])), pid: started.child.pid!, stop: started.stop };
}

/** Sum of a counter's samples in a Prometheus text page. */
export async function scrapeCounter(metricsUrl: string, name: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** The machine a figure was measured on: cores, memory, Node. */
export function machineDescription(): string {
  const cpus = os.cpus();
  return `${os.hostname()}: ${cpus.length} x ${cpus[0]?.model.trim() ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`;
}

/** The commit the project is checked out at (with "+changes" when the work tree differs), or "unknown" outside git. */
export function currentCommit(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
    const changed = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: PROJECT,
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
    return changed ? `${commit}+changes` : commit;
  } catch {
    return 'unknown';
  }
}

/** A collector that takes every OTLP export and keeps nothing: the traced row pays for exporting, not for a real backend. */
export async function startSpanSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  const { origin, close } = await listenOnLoopback(server);
  return { url: `${origin}/v1/traces`, close };
}
