import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Linux's clock ticks per second for /proc's CPU times (`getconf CLK_TCK`; 100 on every distribution we run on). */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) of one process, or 0 when it is gone. */
function processCpuSeconds(pid: number): number {
  try {
    // The command name may hold spaces: the fields that follow it start after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The postmaster of a data folder and its children (every backend, the WAL writer, the checkpointer). */
export function postgresPids(dataDir: string): number[] {
  const postmaster = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return [postmaster, ...children];
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

/** Starts measuring: call the result to get the CPU each part used since. Pids are read afresh at the end (backends come and go). */
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
