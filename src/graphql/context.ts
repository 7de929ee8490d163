import type { Transaction } from 'kysely';
import type { RootPool } from '../db/database.js';
import type { DB } from '../db/schema.js';
import {
  runInOneStatement,
  runInTransaction,
  type Declined,
  type OneStatementUnit,
  type RunOptions,
  type RunResult,
  type TransactionSettings,
} from '../db/transaction.js';
import type { OperationTurn } from '../services/operation-turn.js';
import type { Session } from '../features/identity/session.js';
import type { Logger } from '../core/logger.js';
import type { AppServices } from '../services/services.js';
import type { IssueLeases } from '../features/coupons/leases.js';

export type { AppServices };

/**
 * The process-wide services as a request sees them: no pool, which only the runners reach, and of
 * the budget leases only what an issue calls (IssueLeases), not their refill, renewal or release.
 */
export type RequestServices = Omit<AppServices, 'pool' | 'backgroundPool' | 'budgetLeases'> & { budgetLeases: IssueLeases };

/**
 * A request's only way to the database: the transaction runners, bound to the root pool and the
 * transaction settings. The context holds no pool, so nothing a resolver is handed can query
 * outside a runner (the executor rule, docs/design.md §3); runRead and runMutation call these.
 */
export interface DatabaseRunners {
  inTransaction<T>(options: RunOptions, work: (trx: Transaction<DB>) => Promise<T>): Promise<RunResult<T>>;
  inOneStatement<T>(options: Pick<RunOptions, 'deadline' | 'onRetry'>, work: OneStatementUnit<T>): Promise<RunResult<T> | Declined>;
}

export function databaseRunners(pool: RootPool, settings: TransactionSettings): DatabaseRunners {
  return {
    inTransaction: (options, work) => runInTransaction(pool, settings, options, work),
    inOneStatement: (options, work) => runInOneStatement(pool, settings, options, work),
  };
}

/**
 * What a request came to, filled on the way back up and read by the HTTP layer (the response's
 * headers, the spans, the request's log line). The resolvers record what runMutation returned or
 * threw (recordMutation); the plugins what the result says. It belongs to the request: whoever
 * hands the request to Yoga passes it in with the server context.
 */
export interface RequestReport {
  /** Transaction attempts the request made (retries included). */
  attempts?: number;
  /** The answer was a stored Idempotency-Key response. */
  replayed?: boolean;
  /** A business status (ISSUED, MONTHLY_CAP, …) or the first error code. */
  outcome?: string;
  /** SQLSTATE of the database error behind a failure. */
  sqlState?: string;
}

/** What the HTTP layer puts in Yoga's server context for every request: its report (a fresh one when the caller keeps none). */
export interface ReportingServerContext {
  report?: RequestReport;
}

/** One per GraphQL request. */
export interface Context {
  services: RequestServices;
  /** The runners on the root pool (runRead and runMutation use them; a unit of work uses its `trx`). */
  database: DatabaseRunners;
  session: Session | null;
  requestId: string;
  /** Epoch ms after which the request gives up (REQUEST_DEADLINE_MS after it arrived). */
  deadline: number;
  /** The operation's admission turn; a checkout gives it back while the payment provider answers. */
  turn: OperationTurn;
  /** Aborted when the client goes away: no further SQL is issued for it. */
  signal: AbortSignal;
  /** The request's database queue: its database work, one piece at a time (see runRead). */
  databaseQueue: <T>(work: () => Promise<T>) => Promise<T>;
  log: Logger;
  /** The raw Idempotency-Key header, checked when a mutation executes. */
  idempotencyKeyHeader: string | null;
  /** Set for a mutation sent with a valid Idempotency-Key. */
  idempotency: { key: string; fingerprint: string } | null;
  report: RequestReport;
}
