import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../core/logger.js';

/**
 * The primary's HTTP processes of WEB_CONCURRENCY: each is replaced by starting its successor
 * first and stopping it only once the successor listens, so capacity never drops while one
 * drains. Messages between the two sides:
 *
 * - to an HTTP process, `replaced`: its successor listens; drain now and exit. No grace period:
 *   nothing routes to one HTTP process by /ready (the primary hands new connections to the ones
 *   that listen), and /ready stays 200 on the others;
 * - to an HTTP process, `stop`: the whole server stops; drain as a single process would, with the
 *   grace period when `graceful` (SIGTERM to the primary), so that /ready fails everywhere first;
 * - to the primary, `stopping`: the process was sent a SIGTERM of its own (an operator replacing
 *   it): its successor starts at once, while it drains without a grace period;
 * - to the primary, `heartbeat`, every fifth of HTTP_HEARTBEAT_TIMEOUT_MS from the process's event
 *   loop: a process that is frozen (SIGSTOP, a machine paused, a loop that never yields) sends none,
 *   and the primary kills it (SIGKILL: a frozen process cannot drain) and starts another. Clients
 *   kept alive to it would otherwise wait for ever, and the kernel keeps queueing connections for it.
 */

export const REPLACED = { type: 'replaced' } as const;
export const STOPPING = { type: 'stopping' } as const;
export const STOP = 'stop';
const HEARTBEAT = { type: 'heartbeat' } as const;

/** How often a process beats, and the primary looks, as a share of the timeout: several beats may be late before one counts. */
const HEARTBEATS_PER_TIMEOUT = 5;

/**
 * In an HTTP process: sends the heartbeat to the primary from this event loop until the process
 * exits (the timer does not keep it alive). Started before anything else, so that a process
 * waiting for its database at start-up beats too.
 */
export function sendHeartbeats(timeoutMs: number): void {
  const beat = () => {
    if (process.connected) process.send?.(HEARTBEAT);
  };
  beat();
  setInterval(beat, timeoutMs / HEARTBEATS_PER_TIMEOUT).unref();
}

export interface StopMessage {
  type: typeof STOP;
  graceful: boolean;
}

const isMessage = (message: unknown, type: string) => (message as { type?: unknown } | null)?.type === type;

export interface HttpProcessesOptions {
  count: number;
  /** The environment every HTTP process starts with. */
  env: Record<string, string>;
  log: Logger;
  /** How long a replaced process may take to drain (its HTTP_DRAIN_TIMEOUT_MS, plus its pool and loops). */
  drainTimeoutMs: number;
  /** HTTP_HEARTBEAT_TIMEOUT_MS: a process not heard from for this long is killed (and replaced unless the server stops). */
  heartbeatTimeoutMs: number;
}

export interface HttpProcesses {
  /** The rolling reload (SIGHUP): every HTTP process replaced by a new one, one at a time. */
  reload(): Promise<void>;
  /**
   * Stops every HTTP process: each drains (with its grace period when `graceful`); one that does
   * not listen yet has nothing to drain and gets a SIGTERM. Resolves when all have exited.
   */
  stop(graceful: boolean): Promise<void>;
}

/** Time a successor gets to listen: it may wait for the database and for migrations. */
const SUCCESSOR_LISTEN_TIMEOUT_MS = 300_000;
/** What a replaced process gets beyond its drain for closing its pool and loops. */
const EXIT_MARGIN_MS = 15_000;

function listening(worker: Worker, timeoutMs: number): Promise<'listening' | 'exited' | 'timeout'> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), timeoutMs);
    worker.once('listening', () => {
      clearTimeout(timer);
      resolve('listening');
    });
    worker.once('exit', () => {
      clearTimeout(timer);
      resolve('exited');
    });
  });
}

/** Whether `worker` exited within `timeoutMs` (null: however long it takes). */
function exited(worker: Worker, timeoutMs: number | null): Promise<boolean> {
  if (worker.isDead()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = timeoutMs === null ? undefined : setTimeout(() => resolve(false), timeoutMs);
    worker.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * The primary's side of the heartbeat: when each process was last heard from. The watch starts
 * with a process's first beat (loading the code may take a while on a busy machine; a successor
 * that never listens is the reload's own timeout). A check that itself comes late says the
 * primary was stalled, not its processes: their beats are still queued, so the clocks restart.
 */
function watchHeartbeats(timeoutMs: number, log: Logger) {
  const lastHeard = new Map<Worker, number>();
  // Looked at every second (at most): a process is killed within a second of its timeout.
  const everyMs = Math.min(1_000, timeoutMs / HEARTBEATS_PER_TIMEOUT);
  let lastCheck = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    const primaryStalled = now - lastCheck > timeoutMs / 2;
    lastCheck = now;
    for (const [worker, heard] of lastHeard) {
      if (primaryStalled) lastHeard.set(worker, now);
      else if (now - heard > timeoutMs && !worker.isDead()) {
        lastHeard.delete(worker);
        log.error(
          { pid: worker.process.pid, silentForMs: now - heard, timeoutMs },
          'an HTTP process stopped answering its heartbeat (frozen?); killing it',
        );
        worker.process.kill('SIGKILL');
      }
    }
  }, everyMs).unref();
  return {
    heard: (worker: Worker) => lastHeard.set(worker, Date.now()),
    forget: (worker: Worker) => lastHeard.delete(worker),
    stop: () => clearInterval(timer),
  };
}

/** The primary's view of its HTTP processes, shared by the functions below. */
interface ProcessGroup {
  options: HttpProcessesOptions;
  heartbeats: ReturnType<typeof watchHeartbeats>;
  stopping: boolean;
  reloading: boolean;
  /** Processes whose successor was started on purpose: their exit is expected and replaces nobody. */
  retired: Set<number>;
  listeningIds: Set<number>;
  /** Successors of a reload that do not listen yet: one that dies is the reload's failure, not a process to replace. */
  onTrial: Set<number>;
}

const pidOf = (worker: Worker) => worker.process.pid;

function forkHttpProcess(group: ProcessGroup): Worker {
  const { log } = group.options;
  const worker = cluster.fork(group.options.env);
  worker.once('listening', () => group.listeningIds.add(worker.id));
  worker.on('message', (message: unknown) => {
    if (isMessage(message, HEARTBEAT.type)) return group.heartbeats.heard(worker);
    if (!isMessage(message, STOPPING.type) || group.stopping || group.retired.has(worker.id)) return;
    group.retired.add(worker.id);
    log.info({ pid: pidOf(worker) }, 'an HTTP process is stopping; starting its successor while it drains');
    forkHttpProcess(group);
  });
  return worker;
}

/** An exit the group expected (a retired process, a stop) is logged; any other starts a replacement. */
function onHttpProcessExit(group: ProcessGroup, worker: Worker, code: number, signal: string | null): void {
  const { log } = group.options;
  group.listeningIds.delete(worker.id);
  group.heartbeats.forget(worker);
  const fields = { pid: pidOf(worker), code, signal };
  if (group.onTrial.delete(worker.id)) return; // replaceHttpProcess() says what happened
  if (group.stopping || group.retired.delete(worker.id)) {
    if (code === 0) log.info(fields, 'an HTTP process drained and exited');
    else log.warn(fields, 'an HTTP process that was stopping exited abnormally');
    return;
  }
  if (code === 0 && signal === null) log.info(fields, 'an HTTP process exited; starting another');
  else log.error(fields, 'an HTTP process died; starting another');
  forkHttpProcess(group);
}

/** Starts `old`'s successor, waits until it listens, then has `old` drain; false if the successor never came up. */
async function replaceHttpProcess(group: ProcessGroup, old: Worker): Promise<boolean> {
  const { log } = group.options;
  // Retired first: should `old` die while its successor starts, the successor is its replacement.
  group.retired.add(old.id);
  const successor = forkHttpProcess(group);
  group.onTrial.add(successor.id);
  const outcome = await listening(successor, SUCCESSOR_LISTEN_TIMEOUT_MS);
  if (outcome === 'listening') group.onTrial.delete(successor.id);
  else {
    log.error({ pid: pidOf(successor), outcome }, 'rolling reload stopped: the new HTTP process did not listen; the others keep serving');
    if (outcome === 'timeout') successor.kill('SIGTERM');
    if (!group.retired.delete(old.id)) forkHttpProcess(group); // `old` died meanwhile and nobody took its place
    return false;
  }
  if (!old.isDead() && old.isConnected()) old.send(REPLACED);
  if (!(await exited(old, group.options.drainTimeoutMs + EXIT_MARGIN_MS))) {
    log.warn({ pid: pidOf(old) }, 'a replaced HTTP process did not exit in time; killing it');
    old.process.kill('SIGKILL');
    await exited(old, EXIT_MARGIN_MS);
  }
  log.info({ old: pidOf(old), new: pidOf(successor) }, 'HTTP process replaced');
  return true;
}

async function reloadHttpProcesses(group: ProcessGroup): Promise<void> {
  const { log } = group.options;
  if (group.stopping) return;
  if (group.reloading) {
    log.warn('a rolling reload is already under way; this SIGHUP changes nothing');
    return;
  }
  group.reloading = true;
  try {
    const current = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead() && !group.retired.has(w.id));
    log.info({ processes: current.length }, 'rolling reload: replacing the HTTP processes one at a time');
    for (const old of current) {
      if (group.stopping || !(await replaceHttpProcess(group, old))) return;
    }
    log.info({ processes: current.length }, 'rolling reload done');
  } finally {
    group.reloading = false;
  }
}

async function stopHttpProcesses(group: ProcessGroup, graceful: boolean): Promise<void> {
  group.stopping = true;
  const all = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
  await Promise.all(
    all.map((worker) => {
      if (group.listeningIds.has(worker.id) && worker.isConnected()) worker.send({ type: STOP, graceful } satisfies StopMessage);
      else worker.process.kill('SIGTERM');
      // A process that freezes while it drains is killed by the heartbeat watch: this wait ends.
      return exited(worker, null);
    }),
  );
  group.heartbeats.stop();
}

export function startHttpProcesses(options: HttpProcessesOptions): HttpProcesses {
  const group: ProcessGroup = {
    options,
    heartbeats: watchHeartbeats(options.heartbeatTimeoutMs, options.log),
    stopping: false,
    reloading: false,
    retired: new Set(),
    listeningIds: new Set(),
    onTrial: new Set(),
  };
  cluster.on('exit', (worker, code, signal) => onHttpProcessExit(group, worker, code, signal));
  for (let i = 0; i < options.count; i++) forkHttpProcess(group);
  return {
    reload: () => reloadHttpProcesses(group),
    stop: (graceful) => stopHttpProcesses(group, graceful),
  };
}
