import type { Transaction } from 'kysely';
import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import type { DB } from '../../db/schema.js';
import { AS_TRANSACTION } from '../../db/transaction.js';
import type { IssueRequest, IssueResult } from './issue.js';
import { runIssue, type IssueContext } from './issue-statement.js';

/**
 * issueCoupon as a transaction: the issue's one statement (runIssue) between BEGIN, which sets the
 * timeouts capped by the deadline, and COMMIT. It runs when the one statement cannot (its session
 * lacks the role's timeouts, too little of the deadline is left) and after contention. The
 * statement is the same, so both ways take from the same rows: slots, the budget row and leases.
 * A race (SQLSTATE 40001) rolls the transaction back and the runner runs it again, as for any
 * contention, within TRANSACTION_MAX_ATTEMPTS and the deadline: what outlasts them is TRY_AGAIN,
 * never BUDGET_EXCEEDED.
 */
export async function issueCoupon(
  trx: Transaction<DB>,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  context: IssueContext,
): Promise<IssueResult> {
  const result = await runIssue(trx, request, bookkeeping, context);
  // BEGIN set both timeouts for this transaction, within what the statement checks for.
  if (result === AS_TRANSACTION) throw new Error('issueCoupon: the transaction runs without the timeouts its BEGIN set');
  return result;
}
