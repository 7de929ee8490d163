import { sql, type RawBuilder, type Transaction } from 'kysely';
import { auditRowCte, type AuditValues } from '../audit/service.js';
import { prepare, type Slots } from '../db/prepared.js';
import type { DB } from '../db/schema.js';
import { storedResponseCte, type ClaimValues, type ResponseValues } from '../idempotency/service.js';

/** The values of the rows a mutation writes as it finishes: its audit row, and with a key its stored response. */
export type FinishValues = AuditValues & Partial<ResponseValues>;

/**
 * The CTEs `audit_row` and (keyed) `stored_response`, written when `when` holds: what a unit of
 * work adds to its last statement so that they cost no round trip of their own.
 */
export function finishCtes(p: Slots<FinishValues>, keyed: boolean, when: RawBuilder<unknown>) {
  return keyed ? sql`${auditRowCte(p, when)}, ${storedResponseCte(p, when)}` : auditRowCte(p, when);
}

/** Thrown by `claimed(false)`: another request holds or held the key, so this unit must not run. */
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
 */
export class Bookkeeping<T> {
  private finishedWith: FinishValues | null = null;

  constructor(
    /** The claim's values when the request has an Idempotency-Key, else null. */
    readonly claim: ClaimValues | null,
    private readonly valuesFor: (result: T) => FinishValues,
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
    this.finishedWith = this.valuesFor(result);
    return this.finishedWith;
  }

  get finished(): boolean {
    return this.finishedWith !== null;
  }
}

const finishAlone = {
  plain: prepare<FinishValues, never>('mutation.finish', (p) => sql`with ${finishCtes(p, false, sql`true`)} select`),
  keyed: prepare<FinishValues, never>('mutation.finish+key', (p) => sql`with ${finishCtes(p, true, sql`true`)} select`),
};

/** Writes the audit row and the stored response in one statement of their own. */
export async function writeFinish<T>(trx: Transaction<DB>, bookkeeping: Bookkeeping<T>, result: T): Promise<void> {
  await (bookkeeping.keyed ? finishAlone.keyed : finishAlone.plain).execute(trx, bookkeeping.finish(result));
}
