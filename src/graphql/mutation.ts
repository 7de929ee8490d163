import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import { AS_TRANSACTION, RollbackAndReturn, type Isolation, type OneStatementUnit } from '../db/transaction.js';
import { claimKey, claimValues, heldKey, type KeyScope } from '../idempotency/service.js';
import { Bookkeeping, KeyHeldElsewhere, writeFinish, type FinishBase, type FinishOfResult } from '../bookkeeping/bookkeeping.js';
import type { Context, RequestReport } from './context.js';
import { AppError, ErrorCode, TryAgainError } from '../errors.js';
import { assertTurnHeld } from './read.js';

export interface MutationSpec<T> {
  /** The mutation's name, as in the schema: the audit row's operation. */
  operation: string;
  /**
   * The unit of work. Refuse by throwing (RollbackAndReturn for a refusal that is data). It may
   * carry the bookkeeping in its own statements (see Bookkeeping); what it leaves is written after it.
   */
  work: (trx: Transaction<DB>, bookkeeping: Bookkeeping<T>) => Promise<T>;
  /** The work's first statement carries the Idempotency-Key claim (claimCte) and reports it with `claimed()`. */
  claimsKey?: boolean;
  /** The ids of what the mutation created or changed, for the audit row. */
  entities: (result: T) => string[];
  /** The tenant the audit row belongs to, when it is not the session's (createTenant). */
  auditTenant?: (result: T) => string;
  isolation?: Isolation;
  /**
   * The unit's hot path as one statement in its own implicit transaction (runInOneStatement): tried
   * first; when it answers AS_TRANSACTION, `work` runs as a transaction instead. It carries the
   * claim and the audit row (and the stored response) in its statement, or writes nothing.
   */
  oneStatement?: (db: Kysely<DB>, bookkeeping: Bookkeeping<T>) => ReturnType<OneStatementUnit<T>>;
}

/** What runMutation learned besides the value: how many attempts it took, whether it replayed a stored response. */
export interface MutationRun<T> {
  value: T;
  /** Transaction attempts (retries included), the one-statement try counted. */
  attempts: number;
  /** The value is the stored response of an earlier request with this Idempotency-Key. */
  replayed: boolean;
}

/**
 * Runs one mutation through the transaction runner with the request's deadline: the only way a
 * request writes. In the same transaction as the work it claims the request's Idempotency-Key
 * (first, so a second request with the key waits for this one), stores the response, and writes
 * the audit row; a rollback takes all three away with the change. The work may carry these in its
 * own statements; whatever it leaves is written here, in one statement before it and one after.
 *
 * A replay returns the stored result, which the rest of the pipeline serializes exactly as the
 * first time: payload types therefore resolve every field from the result itself, never from a
 * fresh read. A TRY_AGAIN it throws names the attempts and the SQLSTATE that exhausted them.
 */
export async function runMutation<T>(ctx: Context, spec: MutationSpec<T>): Promise<MutationRun<T>> {
  assertTurnHeld(ctx);
  const { idempotency, session } = ctx;
  const keyScope: KeyScope = { tenantId: session?.tenantId ?? '', userId: session?.userId ?? '', role: session?.role ?? '' };
  const claim = idempotency
    ? claimValues(keyScope, { ...idempotency, operation: spec.operation }, ctx.services.config.idempotency.ttlHours)
    : null;
  const finishBase: FinishBase = {
    auditTenantId: session?.tenantId ?? '',
    actorUserId: session?.userId ?? null,
    role: session?.role ?? 'anonymous',
    operation: spec.operation,
    requestId: ctx.requestId,
    ...(claim ? { keyTenantId: claim.keyTenantId, keyUserId: claim.keyUserId, keyRole: claim.keyRole, key: claim.key } : {}),
  };
  const finishOfResult = (value: T): FinishOfResult => ({
    entityIds: spec.entities(value),
    ...(spec.auditTenant ? { auditTenantId: spec.auditTenant(value) } : {}),
    ...(claim ? { response: JSON.stringify(value) } : {}),
  });
  // Set by the attempt that found the key answered already (a later attempt starts over).
  let replayed = false;
  /** A key another request claimed: its stored response, or a refusal when it was for another request. */
  const replay = async (executor: Kysely<DB>): Promise<never> => {
    const held = await heldKey(executor, claim!);
    if (held.kind === 'reused') throw keyReused();
    replayed = true;
    throw new RollbackAndReturn<T>(held.response as T);
  };
  const onRetry = (sqlState: string, attempt: number) => {
    ctx.services.metrics.transactionRetries.inc({ sqlstate: sqlState });
    ctx.log.debug({ sqlState, attempt }, 'transaction retried');
  };
  const oneStatement = spec.oneStatement;
  const fast = oneStatement
    ? await ctx.database.inOneStatement<T>({ deadline: ctx.deadline, onRetry }, async (db) => {
        const bookkeeping = new Bookkeeping<T>(claim, finishBase, finishOfResult);
        try {
          const value = await oneStatement(db, bookkeeping);
          if (value !== AS_TRANSACTION && !bookkeeping.finished) {
            throw new Error(`${spec.operation}: a one-statement unit must write its audit row in its statement`);
          }
          return value;
        } catch (error) {
          // Its statement wrote nothing when another request holds the key; reading the answer is all that is left.
          if (error instanceof KeyHeldElsewhere) return replay(db);
          throw error;
        }
      })
    : null;
  const run =
    fast && !('declined' in fast)
      ? fast
      : await ctx.database.inTransaction<T>(
          {
            deadline: ctx.deadline,
            ...(spec.isolation ? { isolation: spec.isolation } : {}),
            onRetry,
            ...(fast ? { attemptsBefore: fast.attemptsMade } : {}),
          },
          async (trx) => {
            replayed = false;
            const bookkeeping = new Bookkeeping<T>(claim, finishBase, finishOfResult);
            try {
              if (claim && !spec.claimsKey) bookkeeping.claimed(await claimKey(trx, claim));
              const value = await spec.work(trx, bookkeeping);
              if (!bookkeeping.finished) await writeFinish(trx, bookkeeping, value);
              return value;
            } catch (error) {
              // A refusal (RollbackAndReturn) passes through: the key and the audit row roll back with it.
              if (!(error instanceof KeyHeldElsewhere)) throw error;
              // A replay writes nothing; rolling back is what keeps it so even if the work wrote by mistake.
              return replay(trx);
            }
          },
        );
  if (run.attempts > 1) ctx.log.info({ attempts: run.attempts }, 'transaction committed after retries');
  return { value: run.value, attempts: run.attempts, replayed };
}

/**
 * Puts what a mutation learned in the request's report (for its log line, its span and the
 * Idempotent-Replayed header): a run's attempts add up over the request's mutations; a TRY_AGAIN
 * names the attempts and the SQLSTATE that exhausted them.
 */
export function recordMutation(report: RequestReport, outcome: { run: MutationRun<unknown> } | { failure: unknown }): void {
  if ('run' in outcome) {
    report.attempts = (report.attempts ?? 0) + outcome.run.attempts;
    if (outcome.run.replayed) report.replayed = true;
  } else if (outcome.failure instanceof TryAgainError) {
    report.sqlState = outcome.failure.sqlState ?? undefined;
    if (outcome.failure.attempts !== undefined) report.attempts = outcome.failure.attempts;
  }
}

const keyReused = () =>
  new AppError(ErrorCode.idempotencyKeyReused, 'This Idempotency-Key was used for a different request; use a new key for a new request');
