import { asyncSlot } from '../core/async-context.js';
import { tryAgain } from '../core/errors.js';
import { currentRequestScope, outsideRequestScope } from '../core/request-scope.js';

/**
 * What the database layer knows about the work it serves, without threading it through calls:
 * the transaction the runner is opening (its timeouts, its deadline, whether it is read-only), and
 * so how long any one database call of that work may wait for its answer. It flows down only:
 * what the driver learns on the way back (a COMMIT that failed) comes up as a thrown CommitFailed.
 */

/** Transaction-level settings, in whole milliseconds. */
interface TransactionTimeouts {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

export interface TransactionMark {
  /** The runner's transaction owns its connection (the executor rule, see pool.ts). */
  holding: boolean;
  /** What BEGIN sets for this transaction (see TimedPostgresDriver). */
  timeouts: TransactionTimeouts;
  /** Epoch ms: no statement of this transaction may wait past it. */
  deadline: number;
  /** A read-only transaction: a write refused inside it is a bug, never a demoted primary. */
  readOnly: boolean;
}

/**
 * What the driver throws when the COMMIT of a runner's transaction fails: the COMMIT was written
 * to the connection, so a lost answer may hide a commit (see transaction.ts). `cause` is the
 * error the COMMIT met, which the runner judges and answers with.
 */
export class CommitFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('COMMIT failed', { cause });
    this.name = 'CommitFailed';
  }
}

// Slots of the one store that flows down with async work (src/core/async-context.ts).
const transactionMarks = asyncSlot<TransactionMark>();

/** Runs `fn` with `mark` as the transaction this async context is opening. */
export function withTransactionMark<T>(mark: TransactionMark, fn: () => Promise<T>): Promise<T> {
  return transactionMarks.run(mark, fn);
}

export function currentTransaction(): TransactionMark | undefined {
  return transactionMarks.get();
}

export function isHoldingTransaction(): boolean {
  return transactionMarks.get()?.holding === true;
}

/** Runs `fn` as work of its own: neither the request nor the transaction that set it off limits it. */
export function asWorkOfItsOwn<T>(fn: () => T): T {
  return outsideRequestScope(() => transactionMarks.run(undefined, fn));
}

/**
 * How long the server waits for PostgreSQL's own answer to a statement past its
 * `statement_timeout`: PostgreSQL cancels a slow statement itself and says so (57014) over a path
 * that works, and this much later the client stops waiting for a path that does not.
 */
export const CLIENT_LIMIT_MARGIN_MS = 1_000;

/** A limit of its own for work that is long by nature (migrations, command-line tools). */
const explicitLimit = asyncSlot<number>();

/** Runs `fn` with every database call it makes limited to `limitMs` instead of the usual limit. */
export function withCallLimit<T>(limitMs: number, fn: () => Promise<T>): Promise<T> {
  return explicitLimit.run(limitMs, fn);
}

export interface CallLimit {
  ms: number;
  /** Which limit it is, in the words of the configuration: for error messages and logs. */
  source: string;
  /** The deadline of the work, if it has one: past it no statement is sent at all. */
  deadline: number | null;
}

/**
 * The client-side limit of one database call made now: what is left of the work's deadline (the
 * runner's transaction, else the request's), capped by the statement's `statement_timeout` plus
 * CLIENT_LIMIT_MARGIN_MS, so that PostgreSQL's own cancel arrives first whenever the path works.
 * Work without a deadline (background statements outside the runner) gets `statement_timeout`
 * plus the margin.
 */
export function callLimit(statementTimeoutMs: number): CallLimit {
  const mark = transactionMarks.get();
  const byStatement = (mark?.timeouts.statementTimeoutMs ?? statementTimeoutMs) + CLIENT_LIMIT_MARGIN_MS;
  const statementSource = `STATEMENT_TIMEOUT_MS + ${CLIENT_LIMIT_MARGIN_MS} ms`;
  const explicit = explicitLimit.get();
  const deadline = mark?.deadline ?? currentRequestScope()?.deadline ?? null;
  if (deadline === null) {
    return explicit === undefined
      ? { ms: byStatement, source: statementSource, deadline }
      : { ms: explicit, source: 'the limit of this tool', deadline };
  }
  const left = Math.max(0, deadline - Date.now());
  return left < byStatement
    ? { ms: left, source: 'the deadline of the request (REQUEST_DEADLINE_MS) or background pass', deadline }
    : { ms: byStatement, source: statementSource, deadline };
}

/** A request that used its whole deadline met a slow moment; a second later is a fair guess. */
const AFTER_DEADLINE_MS = 1_000;

export function deadlineError(attempts: number) {
  return tryAgain('The request ran out of time; resend it', { attempts, reason: 'deadline', retryAfterMs: AFTER_DEADLINE_MS });
}

/**
 * Migrations and the command-line tools: work that may take minutes on a large database (an index
 * built, a ledger summed), run by a person or a deploy that watches it; still not forever.
 */
export const LONG_WORK_LIMIT_MS = 15 * 60_000;
