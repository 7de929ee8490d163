import { sql, type RawBuilder, type Transaction } from 'kysely';
import { auditRowCte, type AuditValues } from '../audit/service.js';
import { prepare, type Slots } from '../../db/prepared.js';
import type { DB } from '../../db/schema.js';
import { storedResponseCte, type ClaimValues, type ResponseValues } from '../idempotency/service.js';

/** The values of the rows a mutation writes as it finishes: its audit row, and with a key its stored response. */
export type FinishValues = AuditValues & Partial<ResponseValues>;

/** What of them is known before the result: for a statement that builds the entity ids and the response itself. */
export type FinishBase = Omit<AuditValues, 'entityIds'> & Partial<Omit<ResponseValues, 'response'>>;

/** What of them the result decides. */
export type FinishOfResult = Pick<FinishValues, 'entityIds'> & Partial<Pick<FinishValues, 'auditTenantId' | 'response'>>;

/**
 * The CTEs `audit_row` and (keyed) `stored_response`, written when `when` holds: what a unit of
 * work adds to its last statement so that they cost no round trip of their own.
 *
 * @example sql`with ${finishCtes(p, true, sql`true`)} select`
 */
function finishCtes(p: Slots<FinishValues>, keyed: boolean, when: RawBuilder<unknown>) {
  return keyed ? sql`${auditRowCte(p, when)}, ${storedResponseCte(p, when)}` : auditRowCte(p, when);
}

/**
 * Thrown by `claimed(false)`: another request holds or held the key, so this unit must not run.
 *
 * @example if (!claimed) throw new KeyHeldElsewhere()
 */
export class KeyHeldElsewhere extends Error {
  constructor() {
    super('the Idempotency-Key belongs to another request');
    this.name = 'KeyHeldElsewhere';
  }
}

/**
 * What every mutation writes besides its own rows, in its own transaction: the Idempotency-Key's
 * claim (first), and the audit row and stored response (last). runMutation hands this to the unit
 * of work. A unit may carry them in statements it runs anyway, which saves a round trip each:
 * the claim in its first statement (`claimCte`, then `claimed()` with what it found), the rest in
 * its last (`finishCtes` with the values of `finish()`). What it leaves, runMutation writes itself.
 *
 * @example const bookkeeping = new Bookkeeping<IssueResult>(claim, finishBase, finishOfResult)
 */
export class Bookkeeping<T> {
  private done = false;

  constructor(
    /** The claim's values when the request has an Idempotency-Key, else null. */
    readonly claim: ClaimValues | null,
    private readonly base: FinishBase,
    private readonly ofResult: (result: T) => FinishOfResult,
  ) {}

  get keyed(): boolean {
    return this.claim !== null;
  }

  /** Reports the claim CTE's answer; when the key is not this request's, throws KeyHeldElsewhere and the unit stops. */
  claimed(fresh: boolean): void {
    if (!fresh) throw new KeyHeldElsewhere();
  }

  /** The audit row's and stored response's values for `result`, for the statement the caller runs next. */
  finish(result: T): FinishValues {
    this.done = true;
    return { ...this.base, ...this.ofResult(result) };
  }

  /**
   * The values known before the result, for a statement that writes the audit row and the stored
   * response with entity ids and a response of its own making (the one-statement coupon issue).
   */
  finishInStatement(): FinishBase {
    this.done = true;
    return this.base;
  }

  get finished(): boolean {
    return this.done;
  }
}

const finishAlone = {
  plain: prepare<FinishValues, never>('mutation.finish', (p) => sql`with ${finishCtes(p, false, sql`true`)} select`),
  keyed: prepare<FinishValues, never>('mutation.finish+key', (p) => sql`with ${finishCtes(p, true, sql`true`)} select`),
};

/**
 * Writes the audit row and the stored response in one statement of their own.
 *
 * @example await writeFinish(trx, bookkeeping, result)
 */
export async function writeFinish<T>(trx: Transaction<DB>, bookkeeping: Bookkeeping<T>, result: T): Promise<void> {
  await (bookkeeping.keyed ? finishAlone.keyed : finishAlone.plain).execute(trx, bookkeeping.finish(result));
}
