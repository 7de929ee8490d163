import { describeTarget } from '../core/database-url.js';
import type { Logger } from '../core/logger.js';
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

/** The checks of one database path: one at a time, on a timer, sooner when a connection has trouble. */
class HealthWatch implements DatabaseHealth {
  private state: HealthState | null = null;
  private first: Promise<void> | null = null;
  private running: Promise<void> | null = null;
  private started = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private lastCheck = 0;

  constructor(
    private readonly path: DatabasePath,
    private readonly probe: () => Promise<void>,
    private readonly options: HealthOptions,
  ) {}

  private where() {
    const host = this.path.hosts[this.path.firstHost()]!;
    return { database: describeTarget(this.path.target), host: host.host, port: host.port };
  }

  private async checkOnce(): Promise<void> {
    const { log, logOutages } = this.options;
    this.lastCheck = Date.now();
    try {
      await this.probe();
      if (this.state?.available === false && logOutages) {
        log.info({ ...this.where(), downForMs: Date.now() - this.state.downSince! }, 'database available again');
      }
      this.state = { available: true, reason: null, downSince: null };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const downSince = this.state?.downSince ?? Date.now();
      this.state = { available: false, reason, downSince };
      if (logOutages) {
        log.error(
          { ...this.where(), reason, downForMs: Date.now() - downSince },
          'database unavailable: requests answer TRY_AGAIN until it is back',
        );
      }
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    // A check set off by a request's trouble runs under no request's deadline.
    this.timer = asWorkOfItsOwn(() => setTimeout(() => void this.check(), delayMs).unref());
  }

  private check(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.checkOnce().finally(() => {
      this.running = null;
      this.schedule(this.options.intervalMs);
    });
    return this.running;
  }

  /** A path's trouble or recovery: check again soon, though not more often than SOONEST_RECHECK_MS. */
  private readonly soon = (): void => {
    if (!this.started || this.stopped || this.running) return;
    this.schedule(Math.max(0, this.lastCheck + SOONEST_RECHECK_MS - Date.now()));
  };

  readonly start = (): void => {
    // Once stopped (the pools are closing), nothing starts a check: it would open a connection.
    if (this.started || this.stopped) return;
    this.started = true;
    this.path.on('trouble', this.soon);
    this.path.on('recovered', this.soon);
    this.first = asWorkOfItsOwn(() => this.check());
  };

  async current(): Promise<HealthState> {
    this.start();
    if (this.state === null) await this.first;
    return this.state ?? { available: false, reason: 'the process is stopping', downSince: Date.now() };
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.path.off('trouble', this.soon);
    this.path.off('recovered', this.soon);
  }
}

export function watchHealth(path: DatabasePath, probe: () => Promise<void>, options: HealthOptions): DatabaseHealth {
  return new HealthWatch(path, probe, options);
}
