import type { Transaction } from 'kysely';
import { writeAudit } from '../audit/service.js';
import type { DB } from '../db/schema.js';
import { RollbackAndReturn, runInTransaction, type Isolation } from '../db/transaction.js';
import { currentRequestScope } from '../http/request-scope.js';
import { claimKey, storeResponse, type KeyScope } from '../idempotency/service.js';
import type { Context } from './context.js';
import { AppError, ErrorCode } from './errors.js';

export interface MutationSpec<T> {
  /** The mutation's name, as in the schema: the audit row's operation. */
  operation: string;
  /** The unit of work. Refuse by throwing (RollbackAndReturn for a refusal that is data). */
  work: (trx: Transaction<DB>) => Promise<T>;
  /** The ids of what the mutation created or changed, for the audit row. */
  entities: (result: T) => string[];
  /** The tenant the audit row belongs to, when it is not the session's (createTenant). */
  auditTenant?: (result: T) => string;
  isolation?: Isolation;
}

interface Outcome<T> {
  value: T;
  replayed: boolean;
}

/**
 * Runs one mutation through the transaction runner with the request's deadline: the only way a
 * request writes. In the same transaction as the work it claims the request's Idempotency-Key
 * (first, so a second request with the key waits for this one), stores the response, and writes
 * the audit row; a rollback takes all three away with the change.
 *
 * A replay returns the stored result, which the rest of the pipeline serializes exactly as the
 * first time: payload types therefore resolve every field from the result itself, never from a
 * fresh read.
 */
export async function runMutation<T>(ctx: Context, spec: MutationSpec<T>): Promise<T> {
  const scope = currentRequestScope();
  const idempotency = ctx.idempotency;
  const keyScope: KeyScope = {
    tenantId: ctx.session?.tenantId ?? '',
    userId: ctx.session?.userId ?? '',
    role: ctx.session?.role ?? '',
  };
  const run = await runInTransaction<Outcome<T>>(
    ctx.db,
    ctx.services.transactions,
    {
      deadline: ctx.deadline,
      ...(spec.isolation ? { isolation: spec.isolation } : {}),
      onRetry: (sqlState, attempt) => {
        ctx.services.metrics.transactionRetries.inc({ sqlstate: sqlState });
        ctx.log.debug({ sqlState, attempt }, 'transaction retried');
      },
    },
    async (trx) => {
      if (idempotency) {
        const claim = await claimKey(trx, keyScope, { ...idempotency, operation: spec.operation }, ctx.services.config.idempotencyTtlHours);
        if (claim.kind === 'reused') {
          throw new AppError(
            ErrorCode.idempotencyKeyReused,
            'This Idempotency-Key was used for a different request; use a new key for a new request',
          );
        }
        if (claim.kind === 'replay') return { value: claim.response as T, replayed: true };
      }
      const value = await spec.work(trx).catch((error: unknown) => {
        // A refusal rolls back the key and the audit row too; its value is still the answer.
        throw error instanceof RollbackAndReturn ? new RollbackAndReturn<Outcome<T>>({ value: error.value as T, replayed: false }) : error;
      });
      if (idempotency) await storeResponse(trx, keyScope, idempotency.key, value);
      await writeAudit(trx, {
        tenantId: spec.auditTenant?.(value) ?? ctx.session?.tenantId ?? '',
        actorUserId: ctx.session?.userId ?? null,
        role: ctx.session?.role ?? 'anonymous',
        operation: spec.operation,
        entityIds: spec.entities(value),
        requestId: ctx.requestId,
      });
      return { value, replayed: false };
    },
  ).catch((error: unknown) => {
    // TRY_AGAIN names the SQLSTATE that exhausted the retries; the request's log line carries it.
    const reason = error instanceof AppError ? error.extensions['reason'] : undefined;
    if (scope && typeof reason === 'string' && /^[0-9A-Z]{5}$/.test(reason)) scope.sqlState = reason;
    if (scope && error instanceof AppError && typeof error.extensions['attempts'] === 'number') scope.attempts = error.extensions['attempts'];
    throw error;
  });
  if (scope) {
    scope.attempts = (scope.attempts ?? 0) + run.attempts;
    if (run.value.replayed) scope.replayed = true;
  }
  if (run.attempts > 1) ctx.log.info({ attempts: run.attempts }, 'transaction committed after retries');
  return run.value.value;
}
