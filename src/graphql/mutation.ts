import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import { runInTransaction, type Isolation } from '../db/transaction.js';
import type { Context } from './context.js';

/**
 * Runs one mutation's unit of work through the transaction runner with the request's deadline.
 * Every mutation resolver goes through here; nothing else opens a transaction for a request.
 */
export async function runMutation<T>(
  ctx: Context,
  work: (trx: Transaction<DB>) => Promise<T>,
  options: { isolation?: Isolation } = {},
): Promise<T> {
  const { value, attempts } = await runInTransaction(
    ctx.db,
    ctx.services.transactions,
    {
      deadline: ctx.deadline,
      ...(options.isolation ? { isolation: options.isolation } : {}),
      onRetry: (sqlState, attempt) => ctx.log.debug({ sqlState, attempt }, 'transaction retried'),
    },
    work,
  );
  if (attempts > 1) ctx.log.info({ attempts }, 'transaction committed after retries');
  return value;
}
