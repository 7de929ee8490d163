import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../support/ports.js';

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

/**
 * The server as its own process, the way it runs in production: the load generator then measures
 * it from outside instead of sharing its event loop.
 */
export async function startServerProcess(entry: string, env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: PROJECT,
    env: { ...process.env, LOG_LEVEL: 'warn', NODE_ENV: 'development', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes('GraphQL and GraphiQL:')) {
        clearInterval(timer);
        resolve();
      } else if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`the server exited during start-up:\n${output}`));
      }
    }, 50);
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    url: `${base}/graphql`,
    metricsUrl: `${base}/metrics`,
    child,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
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
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    const changed = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: PROJECT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    return changed ? `${commit}+changes` : commit;
  } catch {
    return 'unknown';
  }
}
