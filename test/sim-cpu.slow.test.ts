import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { measureCpu, processTree } from './load/cpu.js';
import { spawnRecorded } from './support/processes.js';

// The bench's CPU per request of PostgreSQL (what npm run sim is calibrated with) is the CPU of a
// process tree whose children come and go: a backend that exits between the two samples must
// still be counted, or a row reads a fraction of what PostgreSQL did.

/** CPU seconds the child burns before it exits. */
const BURN_SECONDS = 0.3;

// A parent that starts a child, which waits for a line on stdin, burns BURN_SECONDS of CPU and exits.
const PARENT = `
const { spawn } = require('node:child_process');
const burn = 'process.stdin.once("data", () => { const s = process.cpuUsage(); while (process.cpuUsage(s).user + process.cpuUsage(s).system < ${BURN_SECONDS * 1e6}); process.exit(0); });';
const child = spawn(process.execPath, ['-e', burn], { stdio: ['pipe', 'inherit', 'inherit'] });
child.on('spawn', () => console.log('started ' + child.pid));
process.stdin.on('data', (line) => child.stdin.write(line));
child.on('exit', () => console.log('reaped'));
setInterval(() => {}, 1000);
`;

const started: ChildProcess[] = [];
afterEach(() => {
  for (const process of started.splice(0)) process.kill('SIGKILL');
});

describe('CPU of a process tree', () => {
  it('counts a child that exits between the two samples (its CPU moves to the parent\u2019s children\u2019s times)', async () => {
    const parent = spawnRecorded(process.execPath, ['-e', PARENT], { stdio: ['pipe', 'pipe', 'inherit'] });
    started.push(parent);
    const lines = createInterface({ input: parent.stdout! })[Symbol.asyncIterator]();
    const first = String((await lines.next()).value);
    const childPid = Number(first.replace('started ', ''));
    expect(processTree(parent.pid!)).toContain(childPid);

    const used = measureCpu(() => ({ tree: processTree(parent.pid!) }));
    parent.stdin!.write('go\n');
    expect(String((await lines.next()).value)).toBe('reaped');
    expect(processTree(parent.pid!)).not.toContain(childPid);
    const cpu = used();
    // /proc counts in clock ticks (10 ms): the child's burn, less a tick of rounding, at least.
    expect(cpu.parts['tree']).toBeGreaterThanOrEqual(BURN_SECONDS - 0.02);
    parent.kill('SIGKILL');
    await once(parent, 'exit');
  });
});
