import type { AppConfig } from '../core/config.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely, Transaction } from 'kysely';
import { AppError, tryAgain, type TryAgainError } from '../core/errors.js';
import { SpanStatusCode, startSpan, traceContext } from '../core/tracing.js';
import { ConnectError, DatabaseUnavailableError, publicFailureSummary, QueryTimeoutError } from './client.js';
import { PoolExhaustedError } from './pool.js';
import type { DB } from './schema.js';
import { CommitFailed, deadlineError, withTransactionMark, type TransactionMark } from './transaction-mark.js';
import { isConnectionFailure, isResourceShortage, isRetryableContention, resourceShortageWords, sqlStateOf, SqlState } from './sqlstate.js';

export { deadlineError };

export interface TransactionSettings {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  maxAttempts: number;
  /** Full-jitter backoff: attempt n sleeps random(0, min(maxDelayMs, baseDelayMs * 2^n)). */
  baseDelayMs: number;
  maxDelayMs: number;
}

const defaultBackoff = { baseDelayMs: 5, maxDelayMs: 250 } as const;

/** The settings every transaction of this process runs with, from DB_LOCK_TIMEOUT_MS and friends. */
export function transactionSettingsOf(config: Pick<AppConfig, 'database' | 'requests'>): TransactionSettings {
  return {
    lockTimeoutMs: config.database.lockTimeoutMs,
    statementTimeoutMs: config.database.statementTimeoutMs,
    idleInTransactionTimeoutMs: config.database.idleInTransactionTimeoutMs,
    maxAttempts: config.requests.transactionMaxAttempts,
    ...defaultBackoff,
  };
}

export type Isolation = 'read committed' | 'serializable';
type AccessMode = 'read write' | 'read only';

export interface RunOptions {
  /** Epoch milliseconds after which no attempt starts and no statement may run. */
  deadline: number;
  isolation?: Isolation;
  /** 'read only' for the reads of a query: PostgreSQL then refuses any write. */
  accessMode?: AccessMode;
  /** Told of every retry, for logs and metrics. */
  onRetry?: (sqlState: string, attempt: number) => void;
  /** Attempts already made another way (a one-statement attempt that met contention): they count against the budget. */
  attemptsBefore?: number;
}

export interface RunResult<T> {
  value: T;
  attempts: number;
  /** True when the work ended with RollbackAndReturn: its value is the answer, nothing was kept. */
  rolledBack: boolean;
}

/**
 * Thrown by a unit of work to undo everything it wrote and still answer with a value: a business
 * refusal (budget spent, cap reached) is data for the client, yet must leave no half-made state.
 * Returning from the callback would commit, so refusing is a throw.
 */
export class RollbackAndReturn<T> extends Error {
  readonly value: T;
  constructor(value: T) {
    // A refusal is an answer, not a fault: nobody reads where it was thrown, and capturing the
    // stack (async frames included) costs more than the rest of building the answer.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super('rolled back on purpose');
    Error.stackTraceLimit = stackTraceLimit;
    this.value = value;
    this.name = 'RollbackAndReturn';
  }
}

export type UnitOfWork<T> = (trx: Transaction<DB>) => Promise<T>;

/** What a one-statement unit answers when this request must run as a whole transaction instead. */
export const AS_TRANSACTION = Symbol('run as a transaction');

/**
 * Runs `use` on a connection of the pool held for it alone (outside any transaction block), with
 * the request marked as holding it: while `use` runs, the request can take no second connection.
 */
export type PinConnection = <R>(use: (db: Kysely<DB>) => Promise<R>) => Promise<R>;

/**
 * A unit whose writes are one statement, sent on a connection it takes with `pin` as its own
 * implicit transaction: the statement commits as it ends, or rolls back whole when it raises. It
 * may read in further statements, never write in them. It takes the connection only when it has
 * a statement to send: an issue waiting for another's batch (coalescer.ts) holds none.
 */
export type OneStatementUnit<T> = (pin: PinConnection) => Promise<T | typeof AS_TRANSACTION>;

/**
 * The one way a mutation touches the database: the whole unit of work in one transaction, retried
 * as a whole (never a statement inside it) on serialization failures, deadlocks and lock timeouts,
 * within both an attempt budget and the request's deadline.
 *
 * Guarantees: the work commits at most once; a thrown error rolls back everything it wrote;
 * timeouts are transaction-level (`set_config(..., true)`), so a pooler in transaction mode is
 * safe; while the work runs, any use of the root pool from the same async context throws
 * PoolReentryError instead of waiting for a second connection.
 */
export async function runInTransaction<T>(
  db: Kysely<DB>,
  settings: TransactionSettings,
  options: RunOptions,
  work: UnitOfWork<T>,
): Promise<RunResult<T>> {
  for (let attempt = (options.attemptsBefore ?? 0) + 1; ; attempt++) {
    const remainingMs = options.deadline - Date.now();
    if (remainingMs <= 0) throw deadlineError(attempt - 1);
    const mark = newMark(settings, options, remainingMs);
    try {
      const value = await tracedAttempt(attempt, settings, options, () => attemptOnce(db, options, mark, work));
      return { value, attempts: attempt, rolledBack: false };
    } catch (thrown) {
      const { error, commitSent } = openCommitFailure(thrown);
      if (error instanceof RollbackAndReturn) return { value: error.value as T, attempts: attempt, rolledBack: true };
      const sent: SentState = { commitSent, readOnly: mark.readOnly };
      const primaryGone = isPrimaryGone(error) && (!commitSent || mark.readOnly);
      if (!isRetryableContention(error) && !primaryGone) throw translate(error, attempt, settings, sent);
      const state = primaryGone ? failureReason(error) : (sqlStateOf(error) ?? 'unknown');
      if (primaryGone && attempt >= settings.maxAttempts) throw translate(error, attempt, settings, sent);
      if (attempt >= settings.maxAttempts) {
        throw tryAgain('The request met too much contention; resend it', {
          attempts: attempt,
          reason: state,
          // A lock held past lock_timeout is likely held as long again; other contention clears within a backoff.
          retryAfterMs: state === SqlState.lockNotAvailable ? settings.lockTimeoutMs : settings.maxDelayMs,
        });
      }
      options.onRetry?.(state, attempt);
      const delayMs = fullJitter(settings, attempt);
      if (Date.now() + delayMs >= options.deadline) throw primaryGone ? translate(error, attempt, settings, sent) : deadlineError(attempt);
      await sleep(delayMs);
    }
  }
}

/** What the attempt's async context carries: its timeouts (each capped by what is left of the deadline, BEGIN sets them). */
function newMark(settings: TransactionSettings, options: RunOptions, remainingMs: number): TransactionMark {
  const cap = (ms: number) => Math.max(1, Math.min(ms, remainingMs));
  return {
    holding: false,
    timeouts: {
      lockTimeoutMs: cap(settings.lockTimeoutMs),
      statementTimeoutMs: cap(settings.statementTimeoutMs),
      idleInTransactionTimeoutMs: cap(settings.idleInTransactionTimeoutMs),
    },
    deadline: options.deadline,
    readOnly: options.accessMode === 'read only',
  };
}

/** How far a failed attempt got: whether its COMMIT went out (a lost answer may then hide a commit), and whether it could write at all. */
export interface SentState {
  commitSent: boolean;
  readOnly: boolean;
}

/** The error an attempt met, and whether the COMMIT had gone out (the driver's CommitFailed says so). */
function openCommitFailure(thrown: unknown): { error: unknown; commitSent: boolean } {
  return thrown instanceof CommitFailed ? { error: thrown.cause, commitSent: true } : { error: thrown, commitSent: false };
}

/** A one-statement unit that left the request to the transaction runner. */
export interface Declined {
  declined: true;
  /** 1 when its statement met contention or never ran (refused by a standby, no connection): that counts as the first attempt. */
  attemptsMade: number;
}

/**
 * Runs a one-statement unit (docs/design.md §5): no BEGIN, no COMMIT, so a lock the statement takes
 * is held only while it runs and commits, never across a round trip. Its timeouts are the sessions'
 * own (the role's defaults, see session-defaults.ts) rather than SET LOCAL; the unit's statement
 * checks that they are in force. Declines (the request then runs as a transaction) when less of the
 * deadline is left than those timeouts (the transaction caps them), when the unit says so, on
 * contention, or when the statement provably never ran (no connection could be opened, a standby
 * refused it): the statement then counts as the first attempt (pass `attemptsMade` on as
 * `attemptsBefore`). Holds one connection, marked like a transaction's, so the executor rule and
 * the client-side call limit hold here too. A lost answer is TRY_AGAIN and never rerun: the
 * statement may have committed, and only the Idempotency-Key can tell.
 */
export async function runInOneStatement<T>(
  db: Kysely<DB>,
  settings: TransactionSettings,
  options: Pick<RunOptions, 'deadline' | 'onRetry'>,
  work: OneStatementUnit<T>,
): Promise<RunResult<T> | Declined> {
  const remainingMs = options.deadline - Date.now();
  if (remainingMs <= 0) throw deadlineError(0);
  if (remainingMs < Math.max(settings.lockTimeoutMs, settings.statementTimeoutMs)) return { declined: true, attemptsMade: 0 };
  const mark = newMark(settings, options, remainingMs);
  // The statement is its own commit: from the moment it is sent, a lost answer may hide one.
  const sent: SentState = { commitSent: true, readOnly: mark.readOnly };
  try {
    const pin: PinConnection = (use) =>
      db.connection().execute(async (connection) => {
        mark.holding = true;
        try {
          return await use(connection);
        } finally {
          mark.holding = false;
        }
      });
    const value = await tracedAttempt(1, settings, {}, () => withTransactionMark(mark, () => work(pin)));
    return value === AS_TRANSACTION ? { declined: true, attemptsMade: 0 } : { value, attempts: 1, rolledBack: false };
  } catch (error) {
    if (error instanceof RollbackAndReturn) return { value: error.value as T, attempts: 1, rolledBack: true };
    const neverRan = error instanceof ConnectError || sqlStateOf(error) === SqlState.readOnlyTransaction;
    if (!isRetryableContention(error) && !neverRan) throw translate(error, 1, settings, sent);
    // The statement rolled back whole or never ran: the transaction runner takes over as attempt 2, after the same pause.
    options.onRetry?.(neverRan ? failureReason(error) : (sqlStateOf(error) ?? 'unknown'), 1);
    const delayMs = fullJitter(settings, 1);
    if (Date.now() + delayMs >= options.deadline) throw neverRan ? translate(error, 1, settings, sent) : deadlineError(1);
    await sleep(delayMs);
    return { declined: true, attemptsMade: 1 };
  }
}

async function attemptOnce<T>(db: Kysely<DB>, options: RunOptions, mark: TransactionMark, work: UnitOfWork<T>): Promise<T> {
  let transaction = db.transaction().setIsolationLevel(options.isolation ?? 'read committed');
  if (options.accessMode) transaction = transaction.setAccessMode(options.accessMode);
  return withTransactionMark(mark, () =>
    transaction.execute(async (trx) => {
      mark.holding = true;
      try {
        return await work(trx);
      } finally {
        // Commit or rollback happens after this callback, on the same connection; no query of
        // ours runs in between, so the mark can drop here.
        mark.holding = false;
      }
    }),
  );
}

/**
 * Each attempt as a span (with tracing on): its number, how it ended (committed, rolled back on
 * purpose, or the SQLSTATE that ended it) and whether the runner tries again. The BEGIN, the
 * statements and the COMMIT are its children.
 */
async function tracedAttempt<T>(
  attempt: number,
  settings: TransactionSettings,
  options: Pick<RunOptions, 'isolation' | 'accessMode'>,
  run: () => Promise<T>,
): Promise<T> {
  const started = startSpan('transaction', {
    attributes: {
      'db.system.name': 'postgresql',
      'app.transaction.attempt': attempt,
      'app.transaction.isolation': options.isolation ?? 'read committed',
      ...(options.accessMode ? { 'app.transaction.access_mode': options.accessMode } : {}),
    },
  });
  if (!started) return run();
  const { span } = started;
  try {
    const value = await traceContext.with(started.context, run);
    span.setAttribute('app.transaction.outcome', 'committed');
    return value;
  } catch (thrown) {
    const { error } = openCommitFailure(thrown);
    if (error instanceof RollbackAndReturn) {
      span.setAttribute('app.transaction.outcome', 'rolled back');
    } else {
      const state = sqlStateOf(error);
      if (state) span.setAttribute('db.response.status_code', state);
      span.setAttribute('app.transaction.outcome', 'failed');
      span.setAttribute('app.transaction.retried', isRetryableContention(error) && attempt < settings.maxAttempts);
      span.setStatus({ code: SpanStatusCode.ERROR, message: state ?? (error instanceof Error ? error.name : 'error') });
    }
    throw thrown;
  } finally {
    span.end();
  }
}

export function fullJitter(settings: Pick<TransactionSettings, 'baseDelayMs' | 'maxDelayMs'>, attempt: number) {
  const ceiling = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** attempt);
  return Math.random() * ceiling;
}

/** A database that went away is usually back, or failed over, within a couple of seconds. */
const RECONNECT_AFTER_MS = 2_000;

/**
 * The primary went away or could not be reached: a lost or reset connection, a terminated or
 * shut-down server (57P01, 57P02, 57P03, 08xxx), a statement that got no answer within its
 * client-side limit, no host that accepts a connection, or a write refused because the server is
 * a standby now (25006). Before COMMIT was sent the transaction cannot have committed (PostgreSQL
 * rolls back a transaction whose connection ended), so the runner tries again on a new connection;
 * after it, the outcome is unknown and only the client's resend with its Idempotency-Key is safe.
 */
export function isPrimaryGone(error: unknown): boolean {
  return (
    error instanceof QueryTimeoutError ||
    error instanceof ConnectError ||
    isConnectionFailure(error) ||
    sqlStateOf(error) === SqlState.readOnlyTransaction
  );
}

function failureReason(error: unknown): string {
  if (error instanceof QueryTimeoutError) return 'unanswered';
  if (error instanceof ConnectError) return 'connect';
  return sqlStateOf(error) ?? 'connection';
}

/**
 * How long a client should wait after each shortage: a full disk waits for an operator or for
 * autovacuum, memory and connection slots free up as other work ends.
 */
const SHORTAGE_RETRY_AFTER_MS: Readonly<Record<string, number>> = {
  [SqlState.diskFull]: 5_000,
  [SqlState.outOfMemory]: 1_000,
  [SqlState.tooManyConnections]: 1_000,
};
const OTHER_SHORTAGE_RETRY_AFTER_MS = 2_000;

/**
 * Class 53 or 58 (sqlstate.ts): the database refused the work for want of disk, memory, connection
 * slots or I/O, not for anything in the request. The statement failed with an error, so its
 * transaction rolled back: nothing was written, and the same request succeeds once the resource is back.
 */
export function resourceShortage(state: string, attempt: number): TryAgainError {
  const words = resourceShortageWords(state);
  return tryAgain(`${words[0]!.toUpperCase()}${words.slice(1)} (${state}); nothing was written: resend the request`, {
    attempts: attempt,
    reason: state,
    retryAfterMs: SHORTAGE_RETRY_AFTER_MS[state] ?? OTHER_SHORTAGE_RETRY_AFTER_MS,
  });
}

/** Maps infrastructure failures to TRY_AGAIN, each naming what ran out; business errors and bugs pass through unchanged. */
export function translate(
  error: unknown,
  attempt: number,
  settings: Pick<TransactionSettings, 'statementTimeoutMs'>,
  sent?: SentState,
): unknown {
  if (error instanceof AppError) return error;
  const details = (reason: string, retryAfterMs: number) => ({ attempts: attempt, reason, retryAfterMs });
  if (error instanceof PoolExhaustedError) {
    // Every connection stayed busy for the whole wait: the backlog is about that long.
    return tryAgain(`The server is busy: ${error.message}; resend the request`, details('pool', error.timeoutMs));
  }
  if (error instanceof DatabaseUnavailableError) {
    return tryAgain(
      `No database host is usable right now (${publicFailureSummary(error.failures)}); resend the request`,
      details('unavailable', Math.max(RECONNECT_AFTER_MS, error.retryAfterMs)),
    );
  }
  if (error instanceof ConnectError) {
    const refusedFor = error.failures.find((failure) => failure.sqlState !== undefined && isResourceShortage({ code: failure.sqlState }));
    if (refusedFor) return resourceShortage(refusedFor.sqlState!, attempt);
    return tryAgain(
      `No database connection could be opened (${publicFailureSummary(error.failures)}); resend the request`,
      details('connect', RECONNECT_AFTER_MS),
    );
  }
  const unknownOutcome = sent?.commitSent === true && !sent.readOnly;
  if (error instanceof QueryTimeoutError) {
    return tryAgain(
      unknownOutcome || error.duringCommit
        ? `The database did not confirm the commit within ${Math.round(error.limitMs)} ms (${error.source}); resend the request with the same Idempotency-Key`
        : `${error.message}; resend the request`,
      details('unanswered', RECONNECT_AFTER_MS),
    );
  }
  if (sqlStateOf(error) === SqlState.queryCanceled) {
    return tryAgain('The request ran out of time; resend it', details(SqlState.queryCanceled, settings.statementTimeoutMs));
  }
  if (sqlStateOf(error) === SqlState.readOnlyTransaction) {
    return tryAgain(
      'The database stopped accepting writes (a failover); resend the request',
      details(SqlState.readOnlyTransaction, RECONNECT_AFTER_MS),
    );
  }
  if (isResourceShortage(error)) return resourceShortage(sqlStateOf(error)!, attempt);
  if (isConnectionFailure(error)) {
    return tryAgain('The database connection was lost; resend the request with the same Idempotency-Key', {
      attempts: attempt,
      reason: sqlStateOf(error) ?? 'connection',
      retryAfterMs: RECONNECT_AFTER_MS,
    });
  }
  return error;
}
