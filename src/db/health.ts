import { sql, type Kysely } from 'kysely';
import { describeTarget } from '../core/database-url.js';
import type { Logger } from '../core/logger.js';
import { ConnectError, type DatabasePath } from './client.js';
import type { GuardedPool } from './pool.js';
import type { ResourceWatch } from './resources.js';
import type { DB } from './schema.js';
import { asWorkOfItsOwn, withCallLimit } from './transaction-mark.js';
import { isConnectionFailure, SqlState, sqlStateOf, stopsWrites } from './sqlstate.js';

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
interface HealthState {
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

function watchHealth(path: DatabasePath, probe: () => Promise<void>, options: HealthOptions): DatabaseHealth {
  return new HealthWatch(path, probe, options);
}

const selectOne = (db: Kysely<DB>) => withCallLimit(HEALTH_CHECK_LIMIT_MS, () => sql`select 1`.execute(db));

/**
 * A write that needs a new page on the database's disk: a temporary table's first row extends a
 * file of its own, so it fails while the disk is full (53100), as the requests' inserts do, where a
 * `select 1` would succeed. Dropped at commit; run only during a resource episode.
 */
const writeOnePage = (db: Kysely<DB>) =>
  withCallLimit(HEALTH_CHECK_LIMIT_MS, () =>
    db.transaction().execute(async (trx) => {
      await sql`create temporary table health_write_check (filler text) on commit drop`.execute(trx);
      await sql`insert into health_write_check values (repeat('x', 100))`.execute(trx);
    }),
  );

/** PostgreSQL answered, but had no connection slot left for us (53300). */
const refusedForSlots = (error: unknown) =>
  error instanceof ConnectError && error.failures.some((failure) => failure.sqlState === SqlState.tooManyConnections);

/**
 * One health check over the health pool's connection: `select 1`, or during a resource episode a
 * write (writeOnePage), whose success ends the episode. A held connection found dead is replaced
 * once, at once, rather than counting the database down until the next check. When no new
 * connection can be had because another application holds every slot of max_connections (53300),
 * the database is up, and this server serves as long as its requests' pool holds connections: it
 * is ready if the pool holds any, since those still answer.
 */
async function checkDatabase(healthDb: Kysely<DB>, requests: GuardedPool, resources: ResourceWatch): Promise<void> {
  const probe = async () => {
    if (!resources.current()) return void (await selectOne(healthDb));
    try {
      await writeOnePage(healthDb);
    } catch (error) {
      // Still short: the episode goes on (it says so once, resources.ts) and keeps /ready at 503.
      const state = sqlStateOf(error);
      if (state !== null && stopsWrites(state)) return;
      throw error;
    }
    resources.writesWork();
  };
  try {
    try {
      await probe();
    } catch (error) {
      // Only a held connection found dead is worth a second try; a new one that failed would fail again.
      if (!isConnectionFailure(error) || error instanceof ConnectError) throw error;
      await probe();
    }
  } catch (error) {
    if (refusedForSlots(error) && !resources.current() && requests.counts.totalCount > 0) return;
    throw error;
  }
}

/**
 * The database's health as /ready reads it: checkDatabase on the health pool's connection every
 * `intervalMs`, and unavailable from the first failed write of a resource episode on, not from the
 * next check, so that a load balancer stops sending at once.
 */
export function watchDatabaseHealth(
  path: DatabasePath,
  watched: { healthDb: Kysely<DB>; requests: GuardedPool; resources: ResourceWatch },
  options: HealthOptions,
): DatabaseHealth {
  const { healthDb, requests, resources } = watched;
  const checks = watchHealth(path, () => checkDatabase(healthDb, requests, resources), options);
  return {
    ...checks,
    async current() {
      const state = await checks.current();
      const episode = resources.current();
      return episode && state.available ? { available: false, reason: episode.firstMessage, downSince: episode.since } : state;
    },
    stop() {
      checks.stop();
      resources.stop();
    },
  };
}
