import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const PROJECT = new URL('../..', import.meta.url).pathname;

/** One of the project's entry points as its own process, the way npm scripts run it. */
export function spawnScript(script: string, env: Record<string, string>, args: string[] = []): ChildProcess {
  return spawn(path.join(PROJECT, 'node_modules/.bin/tsx'), [script, ...args], {
    cwd: PROJECT,
    env: { ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Collects everything a process prints, stdout and stderr together. */
export function captureOutput(child: ChildProcess): () => string {
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return () => output;
}

/** Runs a script to its end; returns its exit code and what it printed. */
export async function runScript(script: string, env: Record<string, string>, args: string[] = []) {
  const child = spawnScript(script, env, args);
  const output = captureOutput(child);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, output: output() };
}

/**
 * Stops a script started with spawnScript and waits for it: tsx passes SIGTERM on to the script,
 * whereas SIGKILL would end tsx alone and leave the script running.
 */
export async function stopScript(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.kill('SIGTERM');
  await closed;
}
