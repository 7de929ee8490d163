import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../support/ports.js';
import { throughProxy } from './delay-proxy.js';

const PROJECT = fileURLToPath(new URL('../..', import.meta.url));

/** A fresh embedded PostgreSQL in a temporary folder, with PostgreSQL's default durability. */
export async function startScratchDatabase(): Promise<{ postgres: EmbeddedPostgres; databaseUrl: string; stop(): Promise<void> }> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-load-'));
  await chmod(root, 0o755);
  const postgres = await startEmbeddedPostgres({ dataDir: path.join(root, 'data'), port: await freePort(), log: createLogger('warn') });
  return {
    postgres,
    databaseUrl: postgres.connectionString('postgres'),
    async stop() {
      await postgres.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
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

/** One of the project's entry points (TypeScript, or compiled to dist/) as its own process, once it prints `ready`. */
async function startProcess(entry: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<ChildOfOurs> {
  // A compiled entry (dist/…js) runs on node alone, as in production.
  const child = spawn(process.execPath, [...(entry.endsWith('.ts') ? ['--import', 'tsx'] : []), entry, ...args], {
    cwd: PROJECT,
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
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setInterval(() => {
      const found = output.match(ready);
      if (found) {
        clearInterval(timer);
        resolve(found);
      } else if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`${entry} exited during start-up:\n${output}`));
      }
    }, 50);
  });
  return {
    child,
    ready: match,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The server as its own process, the way it runs in production: the load generator then measures
 * it from outside instead of sharing its event loop.
 */
export async function startServerProcess(entry: string, env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const started = await startProcess(
    entry,
    [],
    { LOG_LEVEL: 'warn', NODE_ENV: 'development', ...env, PORT: String(port) },
    /GraphQL and GraphiQL:/,
  );
  const base = `http://127.0.0.1:${port}`;
  return { url: `${base}/graphql`, metricsUrl: `${base}/metrics`, child: started.child, stop: started.stop };
}

/**
 * The delay proxy in front of `databaseUrl` as its own process, so that the load generator's busy
 * event loop cannot hold its deliveries back; the URL to connect through it.
 */
export async function startDelayProxyProcess(
  databaseUrl: string,
  delayMs: number,
): Promise<{ databaseUrl: string; stop(): Promise<void> }> {
  const target = new URL(databaseUrl);
  const started = await startProcess(
    'test/load/delay-proxy.ts',
    ['--target', `${target.hostname}:${target.port}`, '--delay-ms', String(delayMs)],
    {},
    /listening on (\d+)/,
  );
  return { databaseUrl: throughProxy(databaseUrl, Number(started.ready[1])), stop: started.stop };
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
