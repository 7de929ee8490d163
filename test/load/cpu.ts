import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Linux's clock ticks per second for /proc's CPU times (`getconf CLK_TCK`; 100 on every distribution we run on). */
const TICKS_PER_SECOND = 100;

/**
 * CPU seconds of one process and of its children that exited and were waited for (user + system,
 * /proc's utime, stime, cutime, cstime), or 0 when it is gone. A backend that exits hands its CPU
 * to the postmaster's children's times: summed over a process tree this way, CPU stays counted when
 * a process of the tree exits between two samples, instead of vanishing with it.
 */
function processCpuSeconds(pid: number): number {
  try {
    // The command name may hold spaces: the fields that follow it start after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** A process and its children as they are now. */
export function processTree(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return [parent, ...children];
}

/** The postmaster of a data folder and its children (every backend, the WAL writer, the checkpointer). */
export function postgresPids(dataDir: string): number[] {
  return processTree(Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]));
}

/** The whole machine's busy and total CPU seconds so far (/proc/stat), for what other processes took. */
function machineCpuSeconds(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  const total = values.reduce((sum, v) => sum + v, 0);
  return { busy: (total - idle) / TICKS_PER_SECOND, total: total / TICKS_PER_SECOND };
}

export interface CpuUse {
  /** CPU seconds per part (server process, PostgreSQL, delay proxy, this load generator) over the interval. */
  parts: Record<string, number>;
  /** CPU seconds every process of the machine took, ours included. */
  machineBusy: number;
  /** Wall seconds of the interval. */
  wall: number;
}

/**
 * Starts measuring: call the result to get the CPU each part used since. Pids are read afresh at
 * the end (backends come and go); a part is a whole process tree (a postmaster and its children),
 * so that a child that exits meanwhile is still counted in its parent's children's times.
 */
export function measureCpu(parts: () => Record<string, number[]>): () => CpuUse {
  const sample = () => {
    const current = parts();
    const seconds = Object.fromEntries(
      Object.entries(current).map(([name, pids]) => [name, pids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0)]),
    );
    const own = process.cpuUsage();
    return { seconds, self: (own.user + own.system) / 1e6, machine: machineCpuSeconds(), at: performance.now() };
  };
  const before = sample();
  return () => {
    const after = sample();
    const used: Record<string, number> = { 'load generator': after.self - before.self };
    for (const name of Object.keys(after.seconds)) used[name] = after.seconds[name]! - (before.seconds[name] ?? 0);
    return { parts: used, machineBusy: after.machine.busy - before.machine.busy, wall: (after.at - before.at) / 1000 };
  };
}
