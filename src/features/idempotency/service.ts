import { hash } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { prepare, type Slots } from '../../db/prepared.js';
import type { DB } from '../../db/schema.js';
import { tryAgain } from '../../core/errors.js';

/** The caller a key belongs to; '' stands for "none" (the operator has no tenant). */
export interface KeyOwner {
  tenantId: string;
  userId: string;
  role: string;
}

export interface IdempotentRequest {
  key: string;
  /** Hash of the operation and its variables: the same key with another request is refused. */
  fingerprint: string;
  operation: string;
}

export type Claim = { kind: 'replay'; response: unknown } | { kind: 'reused' };

const PRINTABLE_KEY = /^[\x20-\x7e]{1,255}$/;

/**
 * Whether an Idempotency-Key has the allowed length and characters.
 *
 * @example isValidKey('0b6c3d5e-checkout-1') // true
 */
export function isValidKey(key: string): boolean {
  return PRINTABLE_KEY.test(key);
}

/** Canonical JSON (sorted object keys), so {a, b} and {b, a} fingerprint the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Hash of the operation (its name and its document in canonical print, so whitespace and comments
 * do not count) and its variables: the same key with another request is refused. The GraphQL
 * layer prints the document; the key knows nothing of GraphQL.
 *
 * @example const print = fingerprint('IssueCoupon', print(document), variables)
 */
export function fingerprint(operationName: string | null | undefined, printedDocument: string, variables: unknown): string {
  // One-shot: a Hash object per request cost several µs more. The bytes hashed are those stored keys were fingerprinted with.
  return hash('sha256', `${operationName ?? ''}\n${printedDocument}\0${canonical(variables ?? {})}`, 'hex');
}

/** The claim's values as a statement binds them (`key*`: the key and its owner, apart from the work's ids). */
export interface ClaimValues {
  keyTenantId: string;
  keyUserId: string;
  keyRole: string;
  key: string;
  fingerprint: string;
  operation: string;
  ttlHours: number;
}

/**
 * The values of a key's claim: whose key it is, the key, the request's fingerprint and operation, and its lifetime.
 *
 * @example const claim = claimValues({ tenantId, userId, role: 'user' }, { key, fingerprint, operation: 'issueCoupon' }, 24)
 */
export const claimValues = (owner: KeyOwner, request: IdempotentRequest, ttlHours: number): ClaimValues => ({
  keyTenantId: owner.tenantId,
  keyUserId: owner.userId,
  keyRole: owner.role,
  key: request.key,
  fingerprint: request.fingerprint,
  operation: request.operation,
  ttlHours,
});

/**
 * The claim as the CTE `claim` of the unit's first statement: one row when this transaction now
 * holds the key afresh (new, or its TTL ran out), none when another request holds or held it.
 * A key another transaction holds makes this insert wait for that transaction: when it commits,
 * the claim comes back empty and the request replays its response; when it rolls back, this one
 * takes the key and executes. So one key executes at most once.
 *
 * `claimed`: a statement that writes its whole change (the one-statement coupon issue) claims
 * only when `when` holds, over the rows of `from`, and stores its `response` with the claim: a
 * statement cannot update a row it inserts, and the claim is its first write. The response then
 * commits with the change or rolls back with it. Where `kept` is false the claim commits already
 * expired: the answer (a refusal) is not kept, the next request with the key runs afresh, and one
 * that waited for this claim takes the key when it commits.
 *
 * @example sql`with ${claimCte(p, { from: sql`facts f`, when: sql`f.ok`, response, kept })} select …`
 */
export function claimCte(
  p: Slots<ClaimValues>,
  claimed?: { when: RawBuilder<unknown>; from: RawBuilder<unknown>; response: RawBuilder<unknown>; kept?: RawBuilder<unknown> },
) {
  const expiresAt = sql`now() + make_interval(hours => ${p.ttlHours})`;
  return sql`claim as (
    insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at, response)
    select ${p.keyTenantId}, ${p.keyUserId}, ${p.keyRole}, ${p.key}, ${p.fingerprint}, ${p.operation},
           ${claimed?.kept ? sql`case when ${claimed.kept} then ${expiresAt} else '-infinity'::timestamptz end` : expiresAt},
           ${claimed?.response ?? sql`null::jsonb`}
      ${claimed ? sql`from ${claimed.from} where ${claimed.when}` : sql``}
    on conflict (tenant_id, user_id, role, key) do update
      set fingerprint = excluded.fingerprint, operation = excluded.operation, response = excluded.response,
          created_at = now(), expires_at = excluded.expires_at
      where idempotency_keys.expires_at <= now()
    returning user_id, role, key)`;
}

const claimAlone = prepare<ClaimValues, { key: string }>('idempotency.claim', (p) => sql`with ${claimCte(p)} select key from claim`);

/**
 * The claim in a statement of its own, for a unit whose first statement does not carry it: true when claimed afresh.
 *
 * @example const claimedAfresh = await claimKey(trx, claim)
 */
export async function claimKey(trx: Transaction<DB>, claim: ClaimValues): Promise<boolean> {
  return (await claimAlone.execute(trx, claim)).rows.length === 1;
}

/**
 * What a key that another request claimed answers: its stored response for the same request, else a
 * refusal. TRY_AGAIN when the key was freed between the claim and this read (it expired and the
 * expiry pass deleted it, or a refused request took it and committed it expired with no response):
 * nothing is left to replay, and the resend claims the key afresh.
 *
 * @example const held = await heldKey(db, claim) // { kind: 'answered', response } or { kind: 'reused' }
 */
export async function heldKey(trx: Kysely<DB>, claim: ClaimValues): Promise<Claim> {
  const existing = await trx
    .selectFrom('idempotency_keys')
    // SQL null, unlike a stored JSON null (a mutation may answer null), is a claim that kept no answer.
    .select(['fingerprint', 'response', sql<boolean>`response is null`.as('unanswered')])
    .where('tenant_id', '=', claim.keyTenantId)
    .where('user_id', '=', claim.keyUserId)
    .where('role', '=', claim.keyRole)
    .where('key', '=', claim.key)
    .executeTakeFirst();
  if (!existing || existing.unanswered) {
    throw tryAgain('The Idempotency-Key was freed while its answer was read; resend the request', {
      reason: 'key released',
      retryAfterMs: 0,
    });
  }
  return existing.fingerprint === claim.fingerprint ? { kind: 'replay', response: existing.response } : { kind: 'reused' };
}

/** The stored response's values: the key it belongs to and the response as JSON. */
export interface ResponseValues {
  keyTenantId: string;
  keyUserId: string;
  keyRole: string;
  key: string;
  response: string;
}

/**
 * The response stored under its key, as the CTE `stored_response` of the unit's last statement
 * (written when `when` holds): it commits with the change it describes, or not at all.
 *
 * @example sql`with ${storedResponseCte(p, sql`true`)} select 1`
 */
export function storedResponseCte(p: Slots<ResponseValues>, when: RawBuilder<unknown>) {
  return sql`stored_response as (
    update idempotency_keys set response = ${p.response}::jsonb
     where tenant_id = ${p.keyTenantId} and user_id = ${p.keyUserId} and role = ${p.keyRole} and key = ${p.key} and ${when}
    returning key)`;
}

/**
 * Deletes up to `limit` expired keys; returns how many. A key another transaction holds is skipped,
 * not waited for: a keyed refusal's claim expires at once, so the pass meets keys that requests are
 * claiming again, and neither should wait for the other.
 *
 * @example const deleted = await deleteExpiredKeys(db, 1000)
 */
export async function deleteExpiredKeys(db: Kysely<DB> | Transaction<DB>, limit: number): Promise<number> {
  const result = await sql`
    delete from idempotency_keys
     where ctid in (select ctid from idempotency_keys where expires_at <= now() limit ${limit} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
