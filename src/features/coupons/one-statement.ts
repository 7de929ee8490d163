import type { Kysely } from 'kysely';
import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import type { DB } from '../../db/schema.js';
import { AS_TRANSACTION, type PinConnection } from '../../db/transaction.js';
import type { IssueRequest, IssueResult } from './issue.js';
import { isRacedIssue, runIssue, type IssueContext } from './issue-statement.js';

/**
 * issueCoupon as one statement in its own implicit transaction (runIssue, docs/design.md §4):
 * ISSUED, ALREADY_ISSUED and every refusal in one round trip, keyed or not, the budget row held
 * for the rest of the statement and its commit only. A statement that met a race (the budget row
 * it waited for went full while another row may still have room, or a double tap committed the
 * coupon) rolled back whole and runs again at once on a fresh snapshot: each race is another
 * issue's progress, and no count of them refuses while a row has room; only the deadline ends
 * them. AS_TRANSACTION when the transaction must run instead: the session lacks the timeouts, or
 * less of the deadline is left than they allow. With a coalescer (COUPON_ISSUE_BATCH_MAX), an issue
 * that meets others on its campaign runs in one statement with them (coalescer.ts).
 */
export async function issueCouponInOneStatement(
  pin: PinConnection,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  context: IssueContext,
): Promise<IssueResult | typeof AS_TRANSACTION> {
  const alone = () => pin((db) => issueAlone(db, request, bookkeeping, context));
  return context.coalescer ? context.coalescer.issue(pin, request, bookkeeping, context, alone) : alone();
}

/** One issue in a statement of its own, run again on each race. */
async function issueAlone(
  db: Kysely<DB>,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  context: IssueContext,
): Promise<IssueResult | typeof AS_TRANSACTION> {
  const { lockTimeoutMs, statementTimeoutMs } = context.timeouts;
  for (;;) {
    try {
      return await runIssue(db, request, bookkeeping, context);
    } catch (error) {
      if (!isRacedIssue(error)) throw error;
      context.onRace?.();
      // The session's timeouts cannot be capped by the deadline; the transaction caps its own.
      if (context.deadline - Date.now() < Math.max(lockTimeoutMs, statementTimeoutMs)) return AS_TRANSACTION;
    }
  }
}
