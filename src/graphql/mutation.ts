import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import {
  AS_TRANSACTION,
  RollbackAndReturn,
  type Declined,
  type Isolation,
  type OneStatementUnit,
  type PinConnection,
  type RunOptions,
  type RunResult,
} from '../db/transaction.js';
import { claimKey, claimValues, heldKey, type ClaimValues, type KeyOwner } from '../features/idempotency/service.js';
import { Bookkeeping, KeyHeldElsewhere, writeFinish, type FinishBase, type FinishOfResult } from '../features/bookkeeping/bookkeeping.js';
import type { Context, RequestReport } from './context.js';
import { AppError, ErrorCode, TryAgainError } from '../core/errors.js';
import { assertTurnHeld } from './read.js';

/**
 * A feature's unit of work: a named function of the feature (issueCoupon's `ConditionalIssuer.issue`,
 * src/features/tenants/service.ts's `createTenant`, …) that runMutation calls once per attempt with the
 * transaction, the request's input, the bookkeeping and what else the request hands the feature. Refuse by
 * throwing (RollbackAndReturn for a refusal that is data). It may carry the bookkeeping in its own
 * statements (see Bookkeeping); what it leaves is written after it.
 */
type MutationWork<Input, T, Needs> = (trx: Transaction<DB>, input: Input, bookkeeping: Bookkeeping<T>, needs: Needs) => Promise<T>;

/**
 * The unit of work's hot path as one statement in its own implicit transaction (runInOneStatement): tried
 * first; when it answers AS_TRANSACTION, `work` runs as a transaction instead. It carries the
 * claim and the audit row (and the stored response) in its statement, or writes nothing.
 */
type OneStatementWork<Input, T, Needs> = (
  pin: PinConnection,
  input: Input,
  bookkeeping: Bookkeeping<T>,
  needs: Needs,
) => ReturnType<OneStatementUnit<T>>;

/**
 * How runMutation calls a mutation's feature, as data: the feature's functions (its unit of work,
 * its one-statement path) and the values they are called with. No closure: each call can be followed.
 */
export type MutationCall<Input, T, Needs = undefined> = CallParts<Input, T, Needs> &
  /** What the request hands the work besides its input (the deadline and admission turn); left out by most mutations. */
  (undefined extends Needs ? { needs?: Needs } : { needs: Needs });

interface CallParts<Input, T, Needs> {
  work: MutationWork<Input, T, Needs>;
  oneStatement?: OneStatementWork<Input, T, Needs> | undefined;
  /** What the work reads its request from (the tenant, the member, the campaign, …). */
  input: Input;
  /** The work's first statement carries the Idempotency-Key claim (claimCte) and reports it with `claimed()`. */
  claimsKey?: boolean | undefined;
  isolation?: Isolation | undefined;
  /** The ids of what the mutation created or changed, for the audit row: a named function of the feature, of the result and the input alone. */
  entities: (result: T, input: Input) => string[];
  /** The tenant the audit row belongs to, when it is not the session's (createTenant's `tenantOfCreated`). */
  auditTenant?: (result: T) => string;
}

export type MutationSpec<Input, T, Needs = undefined> = MutationCall<Input, T, Needs> & {
  /** The mutation's name, as in the schema: the audit row's operation. */
  operation: string;
};

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
export async function runMutation<Input, T, Needs>(ctx: Context, spec: MutationSpec<Input, T, Needs>): Promise<MutationRun<T>> {
  assertTurnHeld(ctx);
  const books = bookkeepingOf(ctx, spec);
  const onRetry = (sqlState: string, attempt: number) => {
    ctx.services.metrics.transactionRetries.inc({ sqlstate: sqlState });
    ctx.log.debug({ sqlState, attempt }, 'transaction retried');
  };
  const fast = spec.oneStatement ? await inOneStatement(ctx, spec, spec.oneStatement, books, onRetry) : null;
  const run = fast && !('declined' in fast) ? fast : await inTransaction(ctx, spec, books, onRetry, fast?.attemptsMade ?? 0);
  if (run.attempts > 1) ctx.log.info({ attempts: run.attempts }, 'transaction committed after retries');
  return { value: run.value, attempts: run.attempts, replayed: run.replayed };
}

/** What every attempt's bookkeeping is made of: the request's Idempotency-Key claim (if any) and its audit row. */
interface MutationBooks<T> {
  claim: ClaimValues | null;
  /** A fresh bookkeeping for one attempt. */
  open(): Bookkeeping<T>;
}

type RetryListener = NonNullable<RunOptions['onRetry']>;
type Attempted<T> = RunResult<T> & { replayed: boolean };

/** The claim of the request's Idempotency-Key and the audit row's values, from the session and the spec. */
function bookkeepingOf<Input, T, Needs>(ctx: Context, spec: MutationSpec<Input, T, Needs>): MutationBooks<T> {
  const { idempotency, session } = ctx;
  const keyOwner: KeyOwner = { tenantId: session?.tenantId ?? '', userId: session?.userId ?? '', role: session?.role ?? '' };
  const claim = idempotency
    ? claimValues(keyOwner, { ...idempotency, operation: spec.operation }, ctx.services.config.idempotency.ttlHours)
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
    entityIds: spec.entities(value, spec.input),
    ...(spec.auditTenant ? { auditTenantId: spec.auditTenant(value) } : {}),
    ...(claim ? { response: JSON.stringify(value) } : {}),
  });
  return { claim, open: () => new Bookkeeping<T>(claim, finishBase, finishOfResult) };
}

/**
 * A key another request claimed: its stored response, thrown as RollbackAndReturn so that the
 * attempt writes nothing (rolling back keeps it so even if the work wrote by mistake), or a
 * refusal when the key was for another request.
 */
async function replayOf<T>(executor: Kysely<DB>, claim: ClaimValues | null): Promise<never> {
  const held = await heldKey(executor, claim!);
  if (held.kind === 'reused') throw keyReused();
  throw new RollbackAndReturn<T>(held.response as T);
}

/** The one-statement try (docs/design.md §5): its answer, or Declined when the unit runs as a transaction instead. */
async function inOneStatement<Input, T, Needs>(
  ctx: Context,
  spec: MutationSpec<Input, T, Needs>,
  oneStatement: OneStatementWork<Input, T, Needs>,
  books: MutationBooks<T>,
  onRetry: RetryListener,
): Promise<Attempted<T> | Declined> {
  let replayed = false;
  const outcome = await ctx.database.inOneStatement<T>({ deadline: ctx.deadline, onRetry }, async (pin) => {
    const bookkeeping = books.open();
    try {
      const value = await oneStatement(pin, spec.input, bookkeeping, spec.needs as Needs);
      if (value !== AS_TRANSACTION && !bookkeeping.finished) {
        throw new Error(`${spec.operation}: a one-statement unit must write its audit row in its statement`);
      }
      return value;
    } catch (error) {
      // Its statement wrote nothing when another request holds the key; reading the answer is all that is left.
      if (!(error instanceof KeyHeldElsewhere)) throw error;
      replayed = true;
      return pin((db) => replayOf<T>(db, books.claim));
    }
  });
  return 'declined' in outcome ? outcome : { ...outcome, replayed };
}

/** The unit as a transaction, with the key's claim before the work and the audit row after it unless the work carries them. */
async function inTransaction<Input, T, Needs>(
  ctx: Context,
  spec: MutationSpec<Input, T, Needs>,
  books: MutationBooks<T>,
  onRetry: RetryListener,
  attemptsBefore: number,
): Promise<Attempted<T>> {
  // Set by the attempt that found the key answered already (a later attempt starts over).
  let replayed = false;
  const options: RunOptions = { deadline: ctx.deadline, onRetry, attemptsBefore, ...(spec.isolation ? { isolation: spec.isolation } : {}) };
  const run = await ctx.database.inTransaction<T>(options, async (trx) => {
    replayed = false;
    const bookkeeping = books.open();
    try {
      if (books.claim && !spec.claimsKey) bookkeeping.claimed(await claimKey(trx, books.claim));
      const value = await spec.work(trx, spec.input, bookkeeping, spec.needs as Needs);
      if (!bookkeeping.finished) await writeFinish(trx, bookkeeping, value);
      return value;
    } catch (error) {
      // A refusal (RollbackAndReturn) passes through: the key and the audit row roll back with it.
      if (!(error instanceof KeyHeldElsewhere)) throw error;
      replayed = true;
      return replayOf<T>(trx, books.claim);
    }
  });
  return { ...run, replayed };
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
