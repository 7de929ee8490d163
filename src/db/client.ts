import { EventEmitter } from 'node:events';
import pg from 'pg';
import { hostLabel, type DatabaseTarget } from '../core/database-url.js';
import { preparedNameOf } from './prepared.js';
import { callLimit, currentTransaction, CLIENT_LIMIT_MARGIN_MS, deadlineError, type CallLimit } from './transaction-mark.js';
import { SqlState, sqlStateOf, stopsWrites } from './sqlstate.js';

/**
 * The connections themselves: which host one goes to, how long it may take to open, how long a
 * statement on it may wait for its answer, and when it must never be used again.
 *
 * A dead network path does not close a socket: bytes just stop arriving, and PostgreSQL's
 * `statement_timeout` cannot help, since its cancel cannot reach us either. So every statement
 * carries a client-side limit (src/db/transaction-mark.ts), and a connection whose statement ran out of it
 * is closed at once: it may be stuck on that dead path, and a connection that went back to the
 * pool would hand the next request the same wait.
 */

/** TCP keepalive: the kernel starts probing a database connection after it has been idle this long. */
const KEEPALIVE_IDLE_MS = 10_000;

/** How long a new connection (TCP, TLS, authentication, the target check) may take by default. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 3_000;

/** While every host fails, new connections are tried at most this often; requests in between fail at once. */
const UNREACHABLE_RETRY_MS = 1_000;

type HostFailureKind = 'timeout' | 'refused' | 'standby' | 'error';

export interface HostFailure {
  /** host:port */
  host: string;
  kind: HostFailureKind;
  message: string;
  /** The server's SQLSTATE when it answered with a refusal (53300: no connection slot left). */
  sqlState?: string;
}

function failureText(failure: HostFailure): string {
  return `${failure.host}: ${failure.message}`;
}

/** A new connection could not be opened on any host tried. */
export class ConnectError extends Error {
  override name = 'ConnectError';
  constructor(readonly failures: HostFailure[]) {
    super(`No database connection could be opened: ${failures.map(failureText).join('; ')}`);
  }

  /** Each host's reason: `db1:5432: …; db2:5432: …`. */
  get reasons(): string {
    return this.failures.map(failureText).join('; ');
  }
}

const KIND_WORDS: Record<HostFailureKind, string> = {
  timeout: 'did not answer within DB_POOL_CONNECT_TIMEOUT_MS',
  refused: 'refused the connection',
  standby: 'is a standby (accepts no writes)',
  error: 'failed',
};

/**
 * What a client may read of connection failures: which limit ran out or what the hosts said, by
 * kind and without names or addresses of the database machines (those go to the log).
 */
export function publicFailureSummary(failures: HostFailure[]): string {
  if (failures.length === 1) return `the database ${KIND_WORDS[failures[0]!.kind]}`;
  return failures.map((failure, i) => `host ${i + 1} of ${failures.length} ${KIND_WORDS[failure.kind]}`).join(', ');
}

/** The database did not answer a statement within its client-side limit; the connection was closed. */
export class QueryTimeoutError extends Error {
  override name = 'QueryTimeoutError';
  constructor(
    readonly limitMs: number,
    /** Which limit ran out, in the configuration's words. */
    readonly source: string,
    /** The statement was COMMIT: whether the transaction committed is unknown. */
    readonly duringCommit: boolean,
  ) {
    super(`The database did not answer within ${Math.round(limitMs)} ms (${source}); the connection was closed`);
  }
}

/** Every host failed a moment ago: the request fails at once instead of waiting for another timeout. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
  constructor(
    readonly failures: HostFailure[],
    readonly retryAfterMs: number,
  ) {
    super(`No database host is usable right now: ${failures.map(failureText).join('; ')}`);
  }
}

/** Network-level reasons a host did not become a usable connection; anything else (a password) is not an outage. */
function kindOf(error: unknown, timedOut: boolean): HostFailureKind {
  if (timedOut) return 'timeout';
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'refused';
  if (code === SqlState.cannotConnectNow || code === SqlState.adminShutdown) return 'refused';
  if (code === 'ETIMEDOUT') return 'timeout';
  // The server closed the connection during the handshake (shutting down, or a proxy in front of it lost it).
  if (error instanceof Error && /Connection terminated/i.test(error.message)) return 'refused';
  return 'error';
}

export type Trouble =
  | { kind: 'stall'; limitMs: number; source: string }
  | { kind: 'host'; failure: HostFailure }
  | { kind: 'resources'; sqlState: string; message: string };

interface HostState {
  /** Since when the host fails, and how; null while it works (or was never tried). */
  failing: HostFailure | null;
  /** The newest attempt begun when the host last worked: a failure of an attempt begun no later is old news. */
  workedAsOf: number;
}

/**
 * One DATABASE_URL as the pools of one process see it: which host to try first (the one that
 * worked last), which hosts fail, and the generation of connections: when one connection stops
 * answering, those opened before it are suspect and are not handed out again.
 *
 * It emits 'trouble' (with a Trouble) when a connection stalls, a host fails or a statement fails
 * for want of resources (the health watcher then checks at once, and the log says what happened) and 'recovered' when a host that failed
 * connects again.
 */
export class DatabasePath extends EventEmitter {
  readonly hosts: DatabaseTarget['hosts'];
  private readonly state: HostState[];
  private preferred = 0;
  /** performance.now() of the last attempt let through while every host failed (a clock that never steps back). */
  private lastTryWhileDown = -Infinity;
  /** Numbers the attempts to open a connection, in the order they begin. */
  private attempts = 0;
  /** Bumped when a connection stalls: idle connections of an older generation are closed, not reused. */
  generation = 0;

  constructor(readonly target: DatabaseTarget) {
    super();
    this.hosts = target.hosts;
    this.state = target.hosts.map(() => ({ failing: null, workedAsOf: 0 }));
  }

  /** The host a new connection tries first. */
  firstHost(): number {
    return this.preferred;
  }

  /** An attempt to open a connection begins: its number, for hostWorked and hostFailed. */
  attemptBegins(): number {
    return ++this.attempts;
  }

  /** The host took a connection, or answered on one (the health check's): it works now. */
  hostWorked(index: number): void {
    const wasDown = this.isDown();
    const host = this.state[index]!;
    host.failing = null;
    // Every attempt begun so far began before this news: their failures no longer count.
    host.workedAsOf = this.attempts;
    this.preferred = index;
    if (wasDown) this.emit('recovered');
  }

  /**
   * An attempt to open a connection on the host failed. An attempt begun before the host last
   * worked says nothing new: during a failover, the answer "a standby" to an attempt that began
   * before the promotion can arrive after another connection found the promoted host writable,
   * and would otherwise mark the one host that works as failing.
   */
  hostFailed(index: number, failure: HostFailure, attempt = this.attempts): void {
    const host = this.state[index]!;
    if (attempt <= host.workedAsOf) return;
    // The next connection tries the host after it; several failures at once move on only once.
    // A failure that is not an outage (a password, too many connections) marks nothing, but the
    // next attempt still tries the next host: one host that fails oddly must not hold every attempt.
    if (this.preferred === index) this.preferred = (index + 1) % this.hosts.length;
    if (failure.kind === 'error') return;
    host.failing = failure;
    this.emit('trouble', { kind: 'host', failure } satisfies Trouble);
  }

  /** A host turned into a standby under our feet: the connections opened to it before are suspect too. */
  hostDemoted(index: number, failure: HostFailure): void {
    this.generation++;
    // News about a connection that worked: it counts whenever the connection was opened.
    this.hostFailed(index, failure, Infinity);
  }

  /** A connection stopped answering: the ones opened before it may sit on the same dead path. */
  connectionStalled(limitMs: number, source: string): void {
    this.generation++;
    this.emit('trouble', { kind: 'stall', limitMs, source } satisfies Trouble);
  }

  /** A statement failed for want of disk, memory or I/O (sqlstate.ts, stopsWrites): writes fail until the database has them again. */
  resourcesShort(sqlState: string, message: string): void {
    this.emit('trouble', { kind: 'resources', sqlState, message } satisfies Trouble);
  }

  /** Every host failed its last attempt: no connection can be expected right now. */
  isDown(): boolean {
    return this.state.every((host) => host.failing !== null);
  }

  failures(): HostFailure[] {
    return this.state.flatMap((host) => (host.failing ? [host.failing] : []));
  }

  /**
   * Whether a new connection may be tried now. While every host fails, one attempt per
   * UNREACHABLE_RETRY_MS goes ahead (it notices the database coming back); the rest fail at once.
   */
  admitNewConnection(): DatabaseUnavailableError | null {
    if (!this.isDown()) return null;
    const now = performance.now();
    const wait = this.lastTryWhileDown + UNREACHABLE_RETRY_MS - now;
    if (wait <= 0) {
      this.lastTryWhileDown = now;
      return null;
    }
    return new DatabaseUnavailableError(this.failures(), Math.max(wait, UNREACHABLE_RETRY_MS));
  }
}

export interface ClientSettings {
  path: DatabasePath;
  connectTimeoutMs: number;
  /** `statement_timeout` of work outside the runner: its statements wait this plus the margin. */
  statementTimeoutMs: number;
  /** Run the statements of prepared.ts under their names (DB_PREPARED_STATEMENTS). */
  preparedStatements: boolean;
  /**
   * A statement of this pool that runs out of its limit makes the connections opened before it
   * suspect (see DatabasePath.generation). The health check's does not: it only reports.
   */
  stallsEvict: boolean;
  /**
   * Every statement answered on a connection of this pool tells the path its host works (the
   * health check's): otherwise a connection kept open by the health check could find the database
   * back while the path, which hears only of new connections, still holds every host failing.
   */
  answersConfirmHost?: boolean;
}

type QueryCallback = (error: Error | null, result?: pg.QueryResult) => void;

/** A client of this module's class: the pool's view of it. */
export interface DatabaseClient extends pg.Client {
  /** The generation of the path it was opened in (see DatabasePath.generation). */
  readonly generation: number;
  /** Why it must not be used again, once it must not. */
  readonly retired: string | null;
  /** Closes the socket now, whatever is in flight. */
  cut(): void;
}

/** A client of one pool (see clientClass), on one host of the pool's path. */
class PathClient extends pg.Client implements DatabaseClient {
  readonly generation: number;
  retired: string | null = null;
  private readonly settings: ClientSettings;
  private readonly path: DatabasePath;
  private readonly hostIndex: number;

  constructor(settings: ClientSettings, live: Set<DatabaseClient>, config: pg.ClientConfig = {}) {
    const { path } = settings;
    const hostIndex = path.firstHost();
    super({
      ...config,
      connectionString: path.hosts[hostIndex]!.url,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    });
    this.generation = path.generation;
    this.settings = settings;
    this.path = path;
    this.hostIndex = hostIndex;
    live.add(this);
    this.once('end', () => live.delete(this));
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (error: Error) => void): void;
  override connect(callback?: (error: Error) => void): Promise<pg.Client> | void {
    const opened = this.open();
    if (!callback) return opened;
    opened.then(() => callback(null as unknown as Error), callback);
  }

  private async open(): Promise<pg.Client> {
    const attempt = this.path.attemptBegins();
    let timedOut = false;
    let connected = false;
    // One turn later, as for statements (see limited()): a handshake answered while the loop was blocked is read first.
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (connected) return;
          timedOut = true;
          this.cut();
        }),
      this.settings.connectTimeoutMs,
    );
    // Between the handshake and the end of the target check nobody listens to this client yet (its
    // pool does once connect() settles), and pg emits 'error' when the server closes it there, as
    // a node does that shuts down: with no listener that would end the process. The check's
    // query fails with the same error, so open() reports it.
    const untilSettled = () => {};
    this.on('error', untilSettled);
    try {
      await super.connect();
      if (!(await this.isTarget())) {
        throw Object.assign(new Error(`is a standby or read-only (target_session_attrs=${this.path.target.target})`), { standby: true });
      }
      connected = true;
      this.path.hostWorked(this.hostIndex);
      return this;
    } catch (error) {
      const failure = this.connectFailure(error, timedOut);
      this.path.hostFailed(this.hostIndex, failure, attempt);
      this.cut();
      throw Object.assign(new ConnectError([failure]), { cause: error });
    } finally {
      connected = true;
      clearTimeout(timer);
      this.off('error', untilSettled);
    }
  }

  /** Why opening this connection failed, as the path and the ConnectError tell it. */
  private connectFailure(error: unknown, timedOut: boolean): HostFailure {
    const standby = (error as { standby?: boolean }).standby === true;
    return {
      host: hostLabel(this.path.hosts[this.hostIndex]!),
      kind: standby ? 'standby' : kindOf(error, timedOut),
      message: timedOut
        ? `did not complete a connection within ${this.settings.connectTimeoutMs} ms (DB_POOL_CONNECT_TIMEOUT_MS)`
        : (error as Error).message,
      ...(sqlStateOf(error) !== null ? { sqlState: sqlStateOf(error)! } : {}),
    };
  }

  /** libpq's target_session_attrs check, on the connection itself. */
  private async isTarget(): Promise<boolean> {
    const query = (text: string) => super.query(text) as Promise<pg.QueryResult<Record<string, unknown>>>;
    switch (this.path.target.target) {
      case 'any':
        return true;
      case 'read-write':
        return (await query('show transaction_read_only')).rows[0]?.['transaction_read_only'] === 'off';
      case 'primary':
        return (await query('select pg_is_in_recovery() as recovery')).rows[0]?.['recovery'] === false;
    }
  }

  cut(): void {
    this.connection.stream.destroy();
  }

  private retire(reason: string): void {
    if (this.retired !== null) return;
    this.retired = reason;
    // Ending a client whose statement is in flight destroys its socket at once (pg 8.23 and later);
    // ending marks it so that the pool closes it on release instead of keeping it.
    this.end().catch(() => {});
    this.cut();
  }

  override query(...args: unknown[]): never {
    const [first, second, third] = args;
    const text = typeof first === 'string' ? first : (first as { text?: unknown } | null)?.text;
    const isSubmittable = typeof (first as { submit?: unknown } | null)?.submit === 'function';
    const superQuery = super.query as (...args: unknown[]) => unknown;
    if (typeof text !== 'string' || isSubmittable) return superQuery.apply(this, args) as never;
    const callback = [second, third].find((arg): arg is QueryCallback => typeof arg === 'function');
    const values = Array.isArray(second) ? (second as unknown[]) : (first as { values?: unknown[] }).values;
    const name = this.settings.preparedStatements && values !== undefined ? preparedNameOf(text) : undefined;
    const config = typeof first === 'string' ? { text, values } : { ...(first as object), text, values };
    const answer = this.limited(name === undefined ? config : { ...config, name }, text);
    if (!callback) return answer as never;
    answer.then(
      (result) => callback(null, result),
      (error: Error) => callback(error),
    );
    return undefined as never;
  }

  private limited(config: pg.QueryConfig, text: string): Promise<pg.QueryResult> {
    const rollback = /^\s*rollback\b/i.test(text);
    const limit = limitFor(rollback, this.settings.statementTimeoutMs);
    // No statement is sent for work whose time is up; the connection stays good.
    if (limit.ms <= 0) return Promise.reject(deadlineError(0));
    const readOnly = currentTransaction()?.readOnly === true;
    const answer = super.query(config) as unknown as Promise<pg.QueryResult>;
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(
        () =>
          // An event loop that was blocked runs expired timers before the I/O that came meanwhile:
          // one turn later, an answer that did arrive has been read and nothing is cut by mistake.
          setImmediate(() => {
            if (settled) return;
            settled = true;
            answer.catch(() => {});
            reject(this.stalled(limit, /^\s*commit\b/i.test(text)));
          }),
        limit.ms,
      );
      answer.then(
        (result) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (this.settings.answersConfirmHost) this.path.hostWorked(this.hostIndex);
          resolve(result);
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.statementFailed(error, readOnly);
          reject(error as Error);
        },
      );
    });
  }

  /** The statement ran out of its limit: this connection may sit on a dead path and is closed. */
  private stalled(limit: CallLimit, duringCommit: boolean): QueryTimeoutError {
    this.retire('timeout');
    if (this.settings.stallsEvict) this.path.connectionStalled(limit.ms, limit.source);
    return new QueryTimeoutError(limit.ms, limit.source, duringCommit);
  }

  /** What a refused statement tells the path: a demoted server, or a database short of resources. */
  private statementFailed(error: unknown, readOnly: boolean): void {
    // A write refused as read-only outside a read-only transaction: this server was demoted.
    if (sqlStateOf(error) === SqlState.readOnlyTransaction && !readOnly) {
      const host = hostLabel(this.path.hosts[this.hostIndex]!);
      this.path.hostDemoted(this.hostIndex, { host, kind: 'standby', message: 'stopped accepting writes (25006: a standby now)' });
      this.retire('standby');
    }
    const state = sqlStateOf(error);
    if (state !== null && stopsWrites(state)) this.path.resourcesShort(state, (error as Error).message);
  }
}

/**
 * The pg.Client class for one pool: each client goes to the path's preferred host with TCP
 * keepalive on, gives up on a connect after `connectTimeoutMs`, checks `target_session_attrs`,
 * limits every statement, and retires itself (closing its socket) when a statement timed out or
 * the server turned out to be a standby. `live` holds every client not yet closed, so that a
 * shutdown can cut them all.
 */
export function clientClass(settings: ClientSettings): { Client: typeof pg.Client; live: Set<DatabaseClient> } {
  const live = new Set<DatabaseClient>();
  // pg.Pool builds its clients as `new Client(config)`: the pool's settings travel in the class.
  class Client extends PathClient {
    constructor(config?: pg.ClientConfig) {
      super(settings, live, config);
    }
  }
  return { Client: Client as unknown as typeof pg.Client, live };
}

/** A ROLLBACK gets the plain statement limit even past a deadline: it only gives the connection back. */
function limitFor(rollback: boolean, statementTimeoutMs: number): CallLimit {
  const limit = callLimit(statementTimeoutMs);
  if (!rollback || limit.ms >= statementTimeoutMs) return limit;
  return { ms: statementTimeoutMs + CLIENT_LIMIT_MARGIN_MS, source: `STATEMENT_TIMEOUT_MS + ${CLIENT_LIMIT_MARGIN_MS} ms`, deadline: null };
}
