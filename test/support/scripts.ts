import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawnRecorded } from './processes.js';

const PROJECT = new URL('../..', import.meta.url).pathname;

/** Variables for a script: a value sets it, undefined leaves it out even when the test run has it. */
export type ScriptEnv = Record<string, string | undefined>;

/** tsx's loader, found from the project whatever folder the script runs in. */
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/**
 * One of the project's entry points as its own process, the way npm scripts run it (`node --import
 * tsx`: one process, so that a signal reaches the script itself; tsx's CLI in front of it relays a
 * SIGTERM, and on a busy machine ends the script with SIGKILL when the script is slow to say it got
 * it). A developer's `.env` in the project is not read (ENV_FILE=/dev/null) unless the test names a
 * file itself.
 */
export function spawnScript(script: string, env: ScriptEnv, args: string[] = [], cwd = PROJECT): ChildProcess {
  const merged: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'info', ENV_FILE: '/dev/null', ...env };
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return spawnRecorded(process.execPath, ['--import', TSX, path.join(PROJECT, script), ...args], {
    cwd,
    env: merged,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * The port a server names in its banner (`Listening on: <host>:<port>`), once printed: a server
 * started with PORT=0 listens where the kernel put it, and says so there.
 */
export function bannerPort(output: string): number | undefined {
  const match = /Listening on: +\S*:(\d+)\s/.exec(output);
  return match ? Number(match[1]) : undefined;
}

/** Collects everything a process prints, stdout and stderr together. */
export function captureOutput(child: ChildProcess): () => string {
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return () => output;
}

/** Runs a script to its end; returns its exit code and what it printed. */
export async function runScript(script: string, env: ScriptEnv, args: string[] = [], cwd = PROJECT) {
  const child = spawnScript(script, env, args, cwd);
  const output = captureOutput(child);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, output: output() };
}

/** Stops a script started with spawnScript (SIGTERM, its own stop) and waits for it. */
export async function stopScript(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.kill('SIGTERM');
  await closed;
}
