import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

const PROJECT = new URL('..', import.meta.url).pathname;
/**
 * docs/operations.md: SHUTDOWN_GRACE_MS + HTTP_DRAIN_TIMEOUT_MS, then STATEMENT_TIMEOUT_MS + 1 s for
 * the leases, then 2 s for the pools, at the defaults.
 */
const DOCUMENTED_STOP_BOUND_MS = 28_000;

interface Npm {
  child: ChildProcess;
  output: () => string;
  /** npm's exit: a script it leaves running keeps the output open, so not 'close'. */
  exited: Promise<[number | null, NodeJS.Signals | null]>;
  /** Its output read to the end, once nothing holds it open. */
  closed: Promise<unknown>;
}

/** `npm <args>` from the project, as a user or a supervisor runs it: npm's own pid is the one signalled. */
function npm(args: string[], env: Record<string, string>): Npm {
  const child = spawnRecorded('npm', args, {
    cwd: PROJECT,
    env: { ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'info', NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, output: captureOutput(child), exited, closed: once(child, 'close') };
}

/** Waits for a line the process prints, or its end, bounded only by the test's timeout. */
async function printed(process: Npm, text: string): Promise<void> {
  while (!process.output().includes(text) && process.child.exitCode === null) await sleep(100);
  expect(process.output()).toContain(text);
}

/** Running, and not a zombie. */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Processes of a process group (npm's: npm, its script, what that started). */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const fields = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]!.split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(name));
    } catch {
      // Ended meanwhile.
    }
  }
  return members;
}

describe('SIGTERM to the pid of npm', () => {
  let dataRoot: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    dataRoot = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-npm-stop-'));
    // The embedded server runs as its own user, which must be able to enter the folder.
    await chmod(dataRoot, 0o755);
    env = { EMBEDDED_PG_PORT: '0', EMBEDDED_PG_DATA_DIR: path.join(dataRoot, 'postgres'), RUN_WORKERS: 'false' };
  });
  afterAll(() => rm(dataRoot, { recursive: true, force: true }));

  it('npm run worker exits 0; npm start stops the server and the PostgreSQL it started, within the documented bound', async ({
    annotate,
  }) => {
    const server = npm(['start'], { ...env, PORT: '0' });
    await printed(server, 'GraphQL and GraphiQL: http');
    const postmaster = Number((await readFile(path.join(env.EMBEDDED_PG_DATA_DIR!, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    expect(running(postmaster)).toBe(true);

    const worker = npm(['run', 'worker'], env);
    await printed(worker, 'outbox relay started');
    worker.child.kill('SIGTERM');
    expect(await worker.exited, worker.output()).toEqual([0, null]);
    expect(groupMembers(worker.child.pid!), "npm run worker's process group").toEqual([]);
    await worker.closed;
    expect(worker.output()).toContain('"msg":"stopped"');

    const signalled = Date.now();
    server.child.kill('SIGTERM');
    const [code] = await server.exited;
    const stopMs = Date.now() - signalled;
    await annotate(`npm start stopped ${stopMs} ms after SIGTERM to npm's pid (documented bound ${DOCUMENTED_STOP_BOUND_MS} ms)`);
    expect(code, server.output()).toBe(0);
    expect(groupMembers(server.child.pid!), "npm's process group").toEqual([]);
    await server.closed;
    expect(server.output()).toContain('"msg":"stopped"');
    // An orderly stop warns of nothing: the pools have closed before PostgreSQL stops, so no
    // connection is terminated under them (57P01).
    const stopLog = server.output().slice(server.output().indexOf('shutting down'));
    expect(stopLog.split('\n').filter((line) => /"level":"(warn|error)"/.test(line))).toEqual([]);
    expect(stopMs).toBeLessThan(DOCUMENTED_STOP_BOUND_MS);
    expect(running(postmaster), 'the embedded PostgreSQL still runs').toBe(false);
    expect(existsSync(path.join(env.EMBEDDED_PG_DATA_DIR!, 'postmaster.pid'))).toBe(false);
  });
});
