import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely, Transaction } from 'kysely';
import { AppError, tryAgain } from '../errors.js';
import { SpanStatusCode, startSpan, traceContext } from '../tracing.js';
import { PoolExhaustedError, withTransactionScope } from './pool.js';
import type { DB } from './schema.js';
import { isConnectionFailure, isRetryableContention, sqlStateOf, SqlState } from './sqlstate.js';

export interface TransactionSettings {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  maxAttempts: number;
  /** Full-jitter backoff: attempt n sleeps random(0, min(maxDelayMs, baseDelayMs * 2^n)). */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const defaultBackoff = { baseDelayMs: 5, maxDelayMs: 250 } as const;

export type Isolation = 'read committed' | 'serializable';
export type AccessMode = 'read write' | 'read only';

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
  constructor(readonly value: T) {
    super('rolled back on purpose');
    this.name = 'RollbackAndReturn';
  }
}

export type UnitOfWork<T> = (trx: Transaction<DB>) => Promise<T>;

/** What a one-statement unit answers when this request must run as a whole transaction instead. */
export const AS_TRANSACTION = Symbol('run as a transaction');

/**
 * A unit whose writes are one statement, sent on `db` (one connection, outside any transaction
 * block) as its own implicit transaction: the statement commits as it ends, or rolls back whole
 * when it raises. It may read in further statements, never write in them.
 */
export type OneStatementUnit<T> = (db: Kysely<DB>) => Promise<T | typeof AS_TRANSACTION>;

/**
 * The one way a mutation touches the database: the whole unit of work in one transaction, retried
 * as a whole (never a statement inside it) on serialization failures, deadlocks and lock timeouts,
 * within both an attempt budget and the request's deadline.
 *
 * Guarantees: the work commits at most once; a thrown error rolls back everything it wrote;
 * timeouts are transaction-scoped (`set_config(..., true)`), so a pooler in transaction mode is
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
    try {
      const value = await tracedAttempt(attempt, settings, options, () => attemptOnce(db, settings, options, remainingMs, work));
      return { value, attempts: attempt, rolledBack: false };
    } catch (error) {
      if (error instanceof RollbackAndReturn) return { value: error.value as T, attempts: attempt, rolledBack: true };
      if (!isRetryableContention(error)) throw translate(error, attempt, settings);
      const state = sqlStateOf(error) ?? 'unknown';
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
      if (Date.now() + delayMs >= options.deadline) throw deadlineError(attempt);
      await sleep(delayMs);
    }
  }
}

/**
 * Runs a one-statement unit (docs/design.md §5): no BEGIN, no COMMIT, so a lock the statement takes
 * is held only while it runs and commits, never across a round trip. Its timeouts are the sessions'
 * own (the role's defaults, see session-defaults.ts) rather than SET LOCAL; the unit's statement
 * checks that they are in force. Returns null when the request must run as a transaction instead:
 * when less of the deadline is left than those timeouts (the transaction caps them), when the unit
 * says so, or on contention (the whole unit then runs as a transaction, its statement counting as
 * the first attempt: pass `attemptsMade` on as `attemptsBefore`). Holds one connection,
 * marked like a transaction's, so the executor rule holds here too. A lost connection is TRY_AGAIN
 * and never rerun: the statement may have committed, and only the Idempotency-Key can tell.
 */
/** A one-statement unit that left the request to the transaction runner. */
export interface Declined {
  declined: true;
  /** 1 when its statement met contention and rolled back: that counts as the first attempt. */
  attemptsMade: number;
}

export async function runInOneStatement<T>(
  db: Kysely<DB>,
  settings: TransactionSettings,
  options: Pick<RunOptions, 'deadline' | 'onRetry'>,
  work: OneStatementUnit<T>,
): Promise<RunResult<T> | Declined> {
  const remainingMs = options.deadline - Date.now();
  if (remainingMs <= 0) throw deadlineError(0);
  if (remainingMs < Math.max(settings.lockTimeoutMs, settings.statementTimeoutMs)) return { declined: true, attemptsMade: 0 };
  try {
    const value = await tracedAttempt(1, settings, {}, () =>
      withTransactionScope(settings, (hold) =>
        db.connection().execute(async (connection) => {
          hold(true);
          try {
            return await work(connection);
          } finally {
            hold(false);
          }
        }),
      ),
    );
    return value === AS_TRANSACTION ? { declined: true, attemptsMade: 0 } : { value, attempts: 1, rolledBack: false };
  } catch (error) {
    if (error instanceof RollbackAndReturn) return { value: error.value as T, attempts: 1, rolledBack: true };
    if (!isRetryableContention(error)) throw translate(error, 1, settings);
    // The statement rolled back whole: the transaction runner takes over as attempt 2, after the same pause.
    options.onRetry?.(sqlStateOf(error) ?? 'unknown', 1);
    const delayMs = fullJitter(settings, 1);
    if (Date.now() + delayMs >= options.deadline) throw deadlineError(1);
    await sleep(delayMs);
    return { declined: true, attemptsMade: 1 };
  }
}

async function attemptOnce<T>(
  db: Kysely<DB>,
  settings: TransactionSettings,
  options: RunOptions,
  remainingMs: number,
  work: UnitOfWork<T>,
): Promise<T> {
  // Each timeout is capped by what is left of the request's deadline; BEGIN sets them.
  const cap = (ms: number) => Math.max(1, Math.min(ms, remainingMs));
  const timeouts = {
    lockTimeoutMs: cap(settings.lockTimeoutMs),
    statementTimeoutMs: cap(settings.statementTimeoutMs),
    idleInTransactionTimeoutMs: cap(settings.idleInTransactionTimeoutMs),
  };
  let transaction = db.transaction().setIsolationLevel(options.isolation ?? 'read committed');
  if (options.accessMode) transaction = transaction.setAccessMode(options.accessMode);
  return withTransactionScope(timeouts, (hold) =>
    transaction.execute(async (trx) => {
      hold(true);
      try {
        return await work(trx);
      } finally {
        // Commit or rollback happens after this callback, on the same connection; no query of
        // ours runs in between, so the mark can drop here.
        hold(false);
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
  } catch (error) {
    if (error instanceof RollbackAndReturn) {
      span.setAttribute('app.transaction.outcome', 'rolled back');
    } else {
      const state = sqlStateOf(error);
      if (state) span.setAttribute('db.response.status_code', state);
      span.setAttribute('app.transaction.outcome', 'failed');
      span.setAttribute('app.transaction.retried', isRetryableContention(error) && attempt < settings.maxAttempts);
      span.setStatus({ code: SpanStatusCode.ERROR, message: state ?? (error instanceof Error ? error.name : 'error') });
    }
    throw error;
  } finally {
    span.end();
  }
}

export function fullJitter(settings: Pick<TransactionSettings, 'baseDelayMs' | 'maxDelayMs'>, attempt: number) {
  const ceiling = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** attempt);
  return Math.random() * ceiling;
}

/** A request that used its whole deadline met a slow moment; a second later is a fair guess. */
const AFTER_DEADLINE_MS = 1_000;

export function deadlineError(attempts: number) {
  return tryAgain('The request ran out of time; resend it', { attempts, reason: 'deadline', retryAfterMs: AFTER_DEADLINE_MS });
}

/** A database that went away is usually back, or failed over, within a couple of seconds. */
const RECONNECT_AFTER_MS = 2_000;

/** Maps infrastructure failures to TRY_AGAIN; business errors and bugs pass through unchanged. */
export function translate(error: unknown, attempt: number, settings: Pick<TransactionSettings, 'statementTimeoutMs'>): unknown {
  if (error instanceof AppError) return error;
  if (error instanceof PoolExhaustedError) {
    // Every connection stayed busy for the whole wait: the backlog is about that long.
    return tryAgain('The server is busy; resend the request', { attempts: attempt, reason: 'pool', retryAfterMs: error.timeoutMs });
  }
  if (sqlStateOf(error) === SqlState.queryCanceled) {
    return tryAgain('The request ran out of time; resend it', {
      attempts: attempt,
      reason: SqlState.queryCanceled,
      retryAfterMs: settings.statementTimeoutMs,
    });
  }
  if (isConnectionFailure(error)) {
    return tryAgain('The database connection was lost; resend the request with the same Idempotency-Key', {
      attempts: attempt,
      reason: sqlStateOf(error) ?? 'connection',
      retryAfterMs: RECONNECT_AFTER_MS,
    });
  }
  return error;
}
