import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

const PROJECT = new URL('..', import.meta.url).pathname;

/** Still running, and still the process the fixture started (its arguments hold the mark). */
function runs(pid: number, mark: string): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[0];
    return state !== 'Z' && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(mark);
  } catch {
    return false;
  }
}

/**
 * A child vitest run of test/fixtures/leftovers/hook-times-out.fixture.ts, with the suite's global
 * setup: its hook starts a process that ignores SIGTERM and one more in a process group of its
 * own, then times out. Returns what it printed and which of those processes still run after it.
 */
async function runFixture(folder: string, env: Record<string, string>) {
  const pids = path.join(folder, `pids-${Object.keys(env).join('-') || 'default'}`);
  await writeFile(pids, '');
  const child = spawnRecorded(
    process.execPath,
    ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/leftovers/vitest.config.ts'],
    {
      cwd: PROJECT,
      env: { ...process.env, ...env, LEFTOVER_PIDS: pids, LEFTOVER_MARK: pids, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const output = captureOutput(child);
  const [code] = (await once(child, 'close')) as [number | null];
  const started = (await readFile(pids, 'utf8')).split('\n').filter(Boolean).map(Number);
  return { code, output: output(), started, running: started.filter((pid) => runs(pid, pids)) };
}

describe('a hook that times out leaves no process behind', () => {
  let folder: string;
  beforeAll(async () => {
    folder = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-leftovers-'));
  });
  afterAll(() => rm(folder, { recursive: true, force: true }));

  it("the file's end stops them (SIGKILL for the one that ignores SIGTERM), before the next file", async () => {
    const run = await runFixture(folder, {});
    expect(run.output).toContain('Hook timed out in 1000ms');
    expect(run.code).toBe(1);
    expect(run.started, run.output).toHaveLength(2);
    expect(run.running, run.output).toEqual([]);
    expect(run.output).toContain('ended 2 processes this file left running');
  });

  it("the run's teardown stops them when nothing in the file did", async () => {
    const run = await runFixture(folder, { WITHOUT_FILE_CLEANUP: '1' });
    expect(run.output).toContain('Hook timed out in 1000ms');
    expect(run.started, run.output).toHaveLength(2);
    expect(run.running, run.output).toEqual([]);
    expect(run.output).toContain('ended 2 processes tests left running');
  });
});
