import type { Transaction } from 'kysely';
import { PoolReentryError } from '../db/pool.js';
import { isHoldingTransaction } from '../db/transaction-mark.js';
import type { DB } from '../db/schema.js';
import { deadlineError } from '../db/transaction.js';
import type { Context } from './context.js';
import { tryAgain, turnNotBack } from '../core/errors.js';

/**
 * Serialises a request's database work (its database queue): one piece at a time, so a request never holds more than
 * one pool connection however many fields it resolves in parallel. The admission of operations
 * (at most MAX_IN_FLIGHT at once) then bounds the pool's use, which is what keeps one request or
 * one tenant from taking every connection.
 */
export function createDatabaseQueue(): <T>(work: () => Promise<T>) => Promise<T> {
  let last: Promise<unknown> = Promise.resolve();
  return (work) => {
    const next = last.then(work, work);
    last = next.catch(() => undefined);
    return next;
  };
}

/**
 * An operation whose turn was given back (a checkout waiting on its payment provider) and did not
 * come back does no more database work: its other fields would run beyond MAX_IN_FLIGHT.
 */
export function assertTurnHeld(ctx: Pick<Context, 'turn'>): void {
  if (!ctx.turn.held) throw turnNotBack();
}

/** Stops a request whose answer nobody will read, or that has used its whole deadline. */
function assertStillWanted(ctx: Pick<Context, 'signal' | 'deadline'>): void {
  if (ctx.signal.aborted) {
    throw tryAgain('The client closed the request', { reason: 'cancelled', retryAfterMs: 0 });
  }
  if (Date.now() >= ctx.deadline) throw deadlineError(0);
}

/**
 * Runs one read of a query under the rules a mutation lives by: inside REQUEST_DEADLINE_MS, with
 * the transaction timeouts BEGIN sets (statement_timeout capped by the deadline), read-only, and
 * with pool exhaustion, timeouts and a lost database answered TRY_AGAIN. A request whose client
 * left or whose deadline passed issues no further SQL: the check runs again once the connection
 * is ours, just before the statement.
 */
export async function runRead<T>(ctx: Context, read: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  // Waiting in this request's own database queue while its transaction is open would never end.
  if (isHoldingTransaction()) throw new PoolReentryError();
  assertTurnHeld(ctx);
  return ctx.databaseQueue(async () => {
    assertStillWanted(ctx);
    const { value } = await ctx.database.inTransaction({ deadline: ctx.deadline, accessMode: 'read only' }, (trx) => {
      assertStillWanted(ctx);
      return read(trx);
    });
    return value;
  });
}
