import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The ledger of the processes tests start: a file that the run's global setup names in this
 * variable (test/support/global-setup.ts), one line `<pid> <start time>` per process, written the
 * moment it is spawned. Each process leads a process group of its own (spawned detached), so that
 * what it starts in turn (tsx's node, a cluster's HTTP processes) is ended with it; an embedded
 * PostgreSQL, which leads a group of its own, is found as a descendant. A hook that times out or
 * throws never stops what it started: the file's own end and the run's teardown do.
 */
export const PROCESS_LEDGER_VARIABLE = 'TEST_PROCESS_LEDGER';

interface Recorded {
  pid: number;
  /** Clock ticks after boot (/proc/<pid>/stat): tells a recorded process from a later one given its pid. */
  startTime: number;
}

/** This file's processes: ended after its last hook, whatever the hooks did. */
const recordedHere: Recorded[] = [];

/** `spawn`, as its own process group, recorded in the run's ledger. */
export function spawnRecorded(command: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  return recordProcess(spawn(command, args, { ...options, detached: true }));
}

/** Records a process spawned with `detached: true`; a process without a pid (spawn failed) has nothing to end. */
function recordProcess(child: ChildProcess): ChildProcess {
  if (child.pid === undefined) return child;
  const startTime = statOf(child.pid)?.startTime;
  if (startTime === undefined) return child; // already gone
  recordedHere.push({ pid: child.pid, startTime });
  const ledger = process.env[PROCESS_LEDGER_VARIABLE];
  if (ledger) appendFileSync(ledger, `${child.pid} ${startTime}\n`);
  return child;
}

/** Ends what this test file started and is still running (called after the file's hooks). */
export function endProcessesOfThisFile(): Promise<string[]> {
  return endProcesses(recordedHere.splice(0));
}

/** Ends every process of the ledger still running; returns what it ended, one line each. */
export function endProcessesOfLedger(ledger: string): Promise<string[]> {
  const lines = readFileSync(ledger, 'utf8').split('\n').filter(Boolean);
  return endProcesses(
    lines.map((line) => {
      const [pid, startTime] = line.split(' ').map(Number);
      return { pid: pid!, startTime: startTime! };
    }),
  );
}

interface ProcessStat {
  pid: number;
  /** R, S, D, Z (a zombie: ended, not yet reaped)… */
  state: string;
  ppid: number;
  pgid: number;
  startTime: number;
}

function statOf(pid: number): ProcessStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name, in parentheses, may hold spaces: the fields after its last ')' are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 4 (ppid), 5 (pgrp) and 22 (starttime) of proc(5); fields[0] is field 3.
    return { pid, state: fields[0]!, ppid: Number(fields[1]), pgid: Number(fields[2]), startTime: Number(fields[19]) };
  } catch {
    return undefined;
  }
}

/** Still running: its pid not yet given to another process, and not a zombie. */
function isRunning(stat: ProcessStat): boolean {
  const now = statOf(stat.pid);
  return now !== undefined && now.startTime === stat.startTime && now.state !== 'Z';
}

function processTable(): ProcessStat[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map((name) => statOf(Number(name)))
    .filter((stat): stat is ProcessStat => stat !== undefined && stat.state !== 'Z');
}

/**
 * The processes still running of a recorded one: its group (the leader itself, if it is the one
 * recorded, and what it started), and every descendant of those (a PostgreSQL in a group of its
 * own). A pid now held by a later process is not ours: a group outlives its leader, and Linux gives
 * no new process the id of a group that still has members.
 */
function survivorsOf(recorded: Recorded[], table: ProcessStat[]): ProcessStat[] {
  const found = new Map<number, ProcessStat>();
  for (const { pid, startTime } of recorded) {
    const leader = table.find((stat) => stat.pid === pid);
    if (leader && leader.startTime !== startTime) continue;
    for (const stat of table) if (stat.pgid === pid) found.set(stat.pid, stat);
  }
  for (let grew = true; grew;) {
    grew = false;
    for (const stat of table)
      if (!found.has(stat.pid) && found.has(stat.ppid)) {
        found.set(stat.pid, stat);
        grew = true;
      }
  }
  found.delete(process.pid);
  return [...found.values()];
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim().slice(0, 160);
  } catch {
    return '?';
  }
}

function signal(pids: number[], name: NodeJS.Signals) {
  for (const pid of pids) {
    try {
      process.kill(pid, name);
    } catch {
      // Ended meanwhile.
    }
  }
}

/**
 * SIGTERM first, so that a server stops the PostgreSQL it started and PostgreSQL stops cleanly;
 * SIGKILL for whatever still runs after `graceMs`.
 */
async function endProcesses(recorded: Recorded[], graceMs = 15_000): Promise<string[]> {
  if (recorded.length === 0) return [];
  const survivors = survivorsOf(recorded, processTable());
  if (survivors.length === 0) return [];
  const ended = survivors.map((stat) => `${stat.pid} ${commandOf(stat.pid)}`);
  const alive = () => survivors.filter(isRunning).map((stat) => stat.pid);
  signal(alive(), 'SIGTERM');
  for (const deadline = Date.now() + graceMs; alive().length > 0 && Date.now() < deadline;) await sleep(100);
  signal(alive(), 'SIGKILL');
  return ended;
}
