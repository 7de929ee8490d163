import { describeTarget } from '../database-url.js';
import type { Logger } from '../logger.js';
import type { DatabasePath } from './client.js';
import { asWorkOfItsOwn } from './scope.js';

/**
 * What the server knows of its database, kept current by one check at a time: `select 1` over a
 * connection of its own, opened by the same factory as the requests' (the same hosts, the same
 * target_session_attrs, keepalive and limits), so a dead path, a frozen connection or a demoted
 * primary shows here as it shows to requests, while a flood of requests, which never gets this
 * connection, does not. /ready answers from the last check without touching the database, and
 * the log says the same as /ready: both read this.
 *
 * It checks every DB_HEALTH_CHECK_INTERVAL_MS, and at once when a connection stalls or a host
 * fails (DatabasePath's 'trouble') or a failing host answers again ('recovered').
 */
export interface HealthState {
  available: boolean;
  /** Why the last check failed. */
  reason: string | null;
  /** Since when the database has been unavailable. */
  downSince: number | null;
}

export interface DatabaseHealth {
  /** The last check's result; before the first check has finished, waits for it. */
  current(): Promise<HealthState>;
  /** Starts checking (the first call to current() does too). */
  start(): void;
  stop(): void;
}

/**
 * One check's `select 1` may take this long before the database counts as unavailable: long
 * enough for a busy server, short enough that /ready turns 503 within seconds of a dead path.
 */
export const HEALTH_CHECK_LIMIT_MS = 2_000;
/** Checks triggered by trouble come at most this often. */
const SOONEST_RECHECK_MS = 200;

export interface HealthOptions {
  intervalMs: number;
  log: Logger;
  /** Log each failed check and the recovery (one process per server does). */
  logOutages: boolean;
}

export function watchHealth(path: DatabasePath, probe: () => Promise<void>, options: HealthOptions): DatabaseHealth {
  const { log } = options;
  let state: HealthState | null = null;
  let first: Promise<void> | null = null;
  let running: Promise<void> | null = null;
  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let lastCheck = 0;

  const where = () => {
    const host = path.hosts[path.firstHost()]!;
    return { database: describeTarget(path.target), host: host.host, port: host.port };
  };

  const checkOnce = async () => {
    lastCheck = Date.now();
    try {
      await probe();
      if (state?.available === false && options.logOutages) {
        log.info({ ...where(), downForMs: Date.now() - state.downSince! }, 'database available again');
      }
      state = { available: true, reason: null, downSince: null };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const downSince = state?.downSince ?? Date.now();
      state = { available: false, reason, downSince };
      if (options.logOutages) {
        log.error(
          { ...where(), reason, downForMs: Date.now() - downSince },
          'database unavailable: requests answer TRY_AGAIN until it is back',
        );
      }
    }
  };

  const schedule = (delayMs: number) => {
    if (stopped) return;
    if (timer) clearTimeout(timer);
    // A check set off by a request's trouble runs under no request's deadline.
    timer = asWorkOfItsOwn(() => setTimeout(() => void check(), delayMs).unref());
  };

  const check = (): Promise<void> => {
    if (running) return running;
    running = checkOnce().finally(() => {
      running = null;
      schedule(options.intervalMs);
    });
    return running;
  };

  const soon = () => {
    if (!started || stopped || running) return;
    schedule(Math.max(0, lastCheck + SOONEST_RECHECK_MS - Date.now()));
  };

  const start = () => {
    // Once stopped (the pools are closing), nothing starts a check: it would open a connection.
    if (started || stopped) return;
    started = true;
    path.on('trouble', soon);
    path.on('recovered', soon);
    first = asWorkOfItsOwn(check);
  };

  return {
    async current() {
      start();
      if (state === null) await first;
      return state ?? { available: false, reason: 'the process is stopping', downSince: Date.now() };
    },
    start,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      path.off('trouble', soon);
      path.off('recovered', soon);
    },
  };
}
