import type { Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import type { Isolation, OneStatementUnit, PinConnection } from '../../db/transaction.js';
import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import type { IssueRequest, IssueResult } from './issue.js';
import { issueCoupon } from './issue-transaction.js';
import type { IssueContext } from './issue-statement.js';
import { issueCouponInOneStatement } from './one-statement.js';

/**
 * How issueCoupon decides (AppServices.algorithms). The server runs `conditionalUpdates`; the naive
 * test stands the read-check-write version in for it, and the benchmark the peer designs it measures against (naive, SERIALIZABLE, advisory locks), which live in test/, and
 * leave the bookkeeping to runMutation (`claimsKey` unset).
 */
export interface CouponIssuer {
  name: string;
  isolation?: Isolation;
  /** The first statement of `issue` carries the Idempotency-Key claim. */
  claimsKey?: boolean;
  issue(trx: Transaction<DB>, request: IssueRequest, bookkeeping: Bookkeeping<IssueResult>, context: IssueContext): Promise<IssueResult>;
  /** The issue as one statement in its own implicit transaction, tried before `issue` (runInOneStatement). */
  oneStatement?: (
    pin: PinConnection,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    context: IssueContext,
  ) => ReturnType<OneStatementUnit<IssueResult>>;
}

/**
 * The product: one statement, in its own implicit transaction for every common outcome, and inside
 * a transaction (issueCoupon) when that cannot run (timeouts not in force, too little of the
 * deadline left) or after contention.
 */
export const conditionalUpdates: CouponIssuer = {
  name: 'conditional updates',
  claimsKey: true,
  issue: issueCoupon,
  oneStatement: issueCouponInOneStatement,
};
