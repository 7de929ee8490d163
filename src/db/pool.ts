import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { PostgresPool } from 'kysely';
import type { Logger } from '../core/logger.js';
import { currentRequestScope, outsideRequestScope } from '../core/request-scope.js';
import { inSpan, tracing } from '../core/tracing.js';
import {
  clientClass,
  ConnectError,
  DEFAULT_CONNECT_TIMEOUT_MS,
  type DatabaseClient,
  type DatabasePath,
  type HostFailure,
} from './client.js';
import { currentTransaction, deadlineError, isHoldingTransaction } from './transaction-mark.js';

/**
 * The executor rule, enforced at run time: while an async context holds a transaction, asking the
 * pool for another connection is a bug. With a pool of N, N requests that each hold one
 * connection and wait for a second hang until something times out; refusing the second
 * `connect()` turns that hang into an immediate, named error. Queries on the transaction reuse
 * its connection and never call `connect()`, so only the mistake is caught.
 *
 * And no wait without an end: waiting for a free connection is limited by
 * DB_POOL_ACQUIRE_TIMEOUT_MS, opening a new one by DB_POOL_CONNECT_TIMEOUT_MS (per host: the next
 * host of a multi-host DATABASE_URL is tried after it), both by the work's deadline, and each
 * failure says which limit ran out. While every host fails, new connections fail at once (see
 * DatabasePath.admitNewConnection) instead of each waiting out its own timeout.
 */

export class PoolReentryError extends Error {
  constructor() {
    super(
      'A second pool connection was requested while this request holds a transaction. ' +
        'Pass the transaction (trx) down to every query of the unit of work.',
    );
    this.name = 'PoolReentryError';
  }
}

/** The pool has ended (the process is stopping): nothing may open a connection on it any more. */
class PoolClosedError extends Error {
  constructor(pool: string) {
    super(`The database pool ${pool} is closed: the process is stopping`);
    this.name = 'PoolClosedError';
  }
}

export class PoolExhaustedError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`No database connection became free within ${timeoutMs} ms (DB_POOL_ACQUIRE_TIMEOUT_MS): every connection was busy`);
    this.name = 'PoolExhaustedError';
  }
}

export interface PoolOptions {
  /** DATABASE_URL: one host or several (see src/core/database-url.ts). */
  connectionString: string;
  max: number;
  /** The wait for a free connection when every one is busy. */
  acquireTimeoutMs: number;
  /** Opening one new connection on one host (DB_POOL_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs?: number;
  /** STATEMENT_TIMEOUT_MS: the client-side limit of statements outside the runner derives from it. */
  statementTimeoutMs?: number;
  applicationName: string;
  /** Run the hot statements as named prepared statements (DB_PREPARED_STATEMENTS; see prepared.ts). */
  preparedStatements: boolean;
}

const DEFAULT_STATEMENT_TIMEOUT_MS = 5_000;

/** How long closing a pool waits for its connections before it cuts them. */
export const POOL_END_LIMIT_MS = 2_000;
/** After cutting, how long the pool's own end may still take. */
const AFTER_CUT_MS = 250;

const INT8_OID = 20;

/** count(*) and sums come back as int8; every such value here fits in a JS number. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** The pool as metrics see it (pg.Pool's names). */
export interface PoolCounts {
  readonly totalCount: number;
  readonly idleCount: number;
  /** Requests waiting for a connection. */
  readonly waitingCount: number;
}

/**
 * Connections handed out, at most `max` at a time, first come first served; a wait that runs out
 * of time leaves the line, so nothing is handed to a waiter that is gone.
 */
class Permits {
  private free: number;
  private readonly waiters: (() => void)[] = [];

  constructor(max: number) {
    this.free = max;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  take(limitMs: number, onTimeout: () => Error): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(grant), 1);
        reject(onTimeout());
      }, limitMs);
      this.waiters.push(grant);
    });
  }

  give(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free++;
  }
}

export interface GuardedPool {
  /** What Kysely's dialect is given: `connect()` refuses re-entry and names the limit that ran out. */
  kyselyPool: PostgresPool;
  counts: PoolCounts;
  /** Ends the pool; connections still busy after `limitMs` are cut. Safe to call twice. */
  end(limitMs?: number): Promise<void>;
}

export interface GuardOptions {
  /**
   * Fail at once while every host fails, and let a stalled connection make the older ones suspect
   * (requests, background work); the health check tries anyway and only reports.
   */
  failFast: boolean;
  /** Each answer on its connections tells the path the host works (the health check's pool; see ClientSettings). */
  answersConfirmHost?: boolean;
}

export function createGuardedPool(options: PoolOptions, log: Logger, path: DatabasePath, guard: GuardOptions): GuardedPool {
  const pool = new PoolGuard(options, log, path, guard);
  const kyselyPool: PostgresPool = { connect: () => pool.connect(), end: () => pool.end() };
  return { kyselyPool, counts: pool.counts, end: (limitMs?: number) => pool.end(limitMs) };
}

/** pg's pool under the guard: the permits, the per-host opening and the end of createGuardedPool. */
class PoolGuard {
  readonly counts: PoolCounts;
  private readonly raw: pg.Pool;
  private readonly live: Set<DatabaseClient>;
  private readonly permits: Permits;
  private ending: Promise<void> | null = null;

  constructor(
    private readonly options: PoolOptions,
    private readonly log: Logger,
    private readonly path: DatabasePath,
    private readonly guard: GuardOptions,
  ) {
    const { Client, live } = clientClass({
      path,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
      preparedStatements: options.preparedStatements,
      stallsEvict: guard.failFast,
      answersConfirmHost: guard.answersConfirmHost ?? false,
    });
    this.live = live;
    this.raw = rawPool(options, log, Client);
    this.permits = new Permits(options.max);
    this.counts = countsOf(this.raw, this.permits);
  }

  /** Kysely's connect(): refuses re-entry, and names the limit that ran out. */
  async connect(): Promise<pg.PoolClient> {
    if (isHoldingTransaction()) throw new PoolReentryError();
    // The wait for a connection, as a span of its own: a busy pool shows as a long one.
    if (!tracing.enabled) return this.acquire();
    return inSpan(
      'pool.connect',
      { attributes: { 'db.system.name': 'postgresql', 'db.client.connection.pool.name': this.options.applicationName } },
      () => this.acquire(),
    );
  }

  private async acquire(): Promise<pg.PoolClient> {
    const { options, permits } = this;
    // A loop's pass or a request that outlived the stop gets no new connection once the pool ends.
    if (this.ending !== null) throw new PoolClosedError(options.applicationName);
    const deadline = currentTransaction()?.deadline ?? currentRequestScope()?.deadline ?? null;
    const left = deadline === null ? Infinity : deadline - Date.now();
    if (left <= 0) throw deadlineError(0);
    await permits.take(Math.min(options.acquireTimeoutMs, left), () =>
      left <= options.acquireTimeoutMs ? deadlineError(0) : new PoolExhaustedError(options.acquireTimeoutMs),
    );
    let client: pg.PoolClient;
    try {
      client = await this.open(deadline);
    } catch (error) {
      permits.give();
      throw error;
    }
    const release = client.release;
    client.release = (error?: Error | boolean) => {
      release.call(client, error);
      permits.give();
    };
    return client;
  }

  /** Within a permit: an idle connection that is not suspect, or a new one on the first host that takes it. */
  private async open(deadline: number | null): Promise<pg.PoolClient> {
    const { path, raw } = this;
    const failures: HostFailure[] = [];
    // Each host once (a new connection goes to the next host after a failure), plus idle connections found suspect.
    for (let turns = 0; turns < this.options.max + path.hosts.length; turns++) {
      const left = deadline === null ? Infinity : deadline - Date.now();
      if (left <= 0) throw deadlineError(0);
      const opensNew = raw.idleCount === 0;
      if (opensNew && this.guard.failFast) {
        const unavailable = path.admitNewConnection();
        if (unavailable) throw unavailable;
      }
      let client: pg.PoolClient;
      try {
        // A new connection is limited by its own connect timeout (client.ts), and by the deadline.
        // It outlives the request that happens to open it: opened in that request scope, every
        // later event of its socket (an 'error' when PostgreSQL stops, minutes later) would run in
        // that request scope and log the long-finished request's id.
        client = await outsideRequestScope(() => connectWithin(raw, left));
      } catch (error) {
        if (!(error instanceof ConnectError)) throw error;
        failures.push(...error.failures);
        if (failures.length >= path.hosts.length) throw new ConnectError(failures);
        continue;
      }
      // An idle connection opened before another stopped answering may sit on the same dead path.
      if (!opensNew && (client as unknown as DatabaseClient).generation < path.generation) {
        client.release(new Error('opened before a connection stalled'));
        continue;
      }
      return client;
    }
    throw new ConnectError(failures);
  }

  end(limitMs = POOL_END_LIMIT_MS): Promise<void> {
    this.ending ??= this.close(limitMs);
    return this.ending;
  }

  private async close(limitMs: number): Promise<void> {
    // pg's pool resolves end() once it has asked its idle connections to close, not once they have
    // closed: a PostgreSQL stopped right after (the embedded one, at shutdown) would still find
    // their backends and terminate them (57P01), and each would report that as a failure.
    const ended = this.raw
      .end()
      .catch(() => {})
      .then(() => allClosed(this.live));
    const inTime = await Promise.race([ended.then(() => true), sleep(limitMs, false)]);
    if (inTime) return;
    this.log.warn(
      { pool: this.options.applicationName, open: this.live.size },
      'database connections still busy at shutdown: closing them',
    );
    for (const client of this.live) client.cut();
    await Promise.race([ended, sleep(AFTER_CUT_MS)]);
  }
}

/** Resolves once every client of `live` has closed its socket: each leaves the set on its 'end'. */
function allClosed(live: Set<DatabaseClient>): Promise<void> {
  return Promise.all([...live].map((client) => new Promise<void>((resolve) => client.once('end', () => resolve())))).then(() => {});
}

function rawPool(options: PoolOptions, log: Logger, Client: typeof pg.Client): pg.Pool {
  const raw = new pg.Pool({
    max: options.max,
    // No timer of pg's own: waiting for a connection and opening one are limited separately, in PoolGuard and in client.ts.
    connectionTimeoutMillis: 0,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName,
    types,
    Client,
  });
  // Without these listeners a database restart emits 'error' on an idle or checked-out client and
  // the whole process dies. The pool drops a broken client on release; the next request gets a new one.
  raw.on('error', (error) => {
    log.warn({ err: errorSummary(error) }, 'idle database connection failed; the pool will replace it');
  });
  raw.on('connect', (client) => {
    client.on('error', (error) => {
      log.warn({ err: errorSummary(error) }, 'database connection failed while checked out');
    });
  });
  return raw;
}

/**
 * The pool's own connect(), with a permit held: pg's pool then never queues (it has an idle
 * connection or room for a new one), so the only wait is the permit's, which ends on time and
 * leaves nothing behind. A connect given up at the deadline keeps its permit until it settles.
 */
function connectWithin(raw: pg.Pool, limitMs: number): Promise<pg.PoolClient> {
  if (limitMs === Infinity) return raw.connect();
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(deadlineError(0));
    }, limitMs);
    raw.connect().then(
      (client) => {
        if (settled) return client.release();
        settled = true;
        clearTimeout(timer);
        resolve(client);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error as Error);
      },
    );
  });
}

function countsOf(raw: pg.Pool, permits: Permits): PoolCounts {
  return {
    get totalCount() {
      return raw.totalCount;
    },
    get idleCount() {
      return raw.idleCount;
    },
    get waitingCount() {
      return permits.waiting;
    },
  };
}

function errorSummary(error: unknown): { message: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? { message: error.message, code } : { message: error.message };
  }
  return { message: String(error) };
}
