import { createHash } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../db/schema.js';

/** The caller a key belongs to; '' stands for "none" (the operator has no tenant). */
export interface KeyScope {
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

export type Claim =
  | { kind: 'new' }
  | { kind: 'replay'; response: unknown }
  | { kind: 'reused' };

const PRINTABLE_KEY = /^[\x20-\x7e]{1,255}$/;

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

export function fingerprint(printedOperation: string, variables: unknown): string {
  return createHash('sha256').update(printedOperation).update('\0').update(canonical(variables ?? {})).digest('hex');
}

/**
 * Claims the key for this transaction, first thing in it. A new key (or one whose TTL ran out)
 * is inserted and the request executes. A key another transaction holds makes this insert wait
 * for that transaction: when it commits, this one replays its stored response; when it rolls
 * back, this one takes the key and executes. So one key executes at most once.
 */
export async function claimKey(trx: Transaction<DB>, scope: KeyScope, request: IdempotentRequest, ttlHours: number): Promise<Claim> {
  const inserted = await sql<{ key: string }>`
    insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at)
    values (${scope.tenantId}, ${scope.userId}, ${scope.role}, ${request.key}, ${request.fingerprint}, ${request.operation},
            now() + make_interval(hours => ${ttlHours}))
    on conflict (tenant_id, user_id, role, key) do update
      set fingerprint = excluded.fingerprint, operation = excluded.operation, response = null,
          created_at = now(), expires_at = excluded.expires_at
      where idempotency_keys.expires_at <= now()
    returning key`.execute(trx);
  if (inserted.rows.length === 1) return { kind: 'new' };
  const existing = await trx
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'response'])
    .where('tenant_id', '=', scope.tenantId)
    .where('user_id', '=', scope.userId)
    .where('role', '=', scope.role)
    .where('key', '=', request.key)
    .executeTakeFirstOrThrow();
  return existing.fingerprint === request.fingerprint ? { kind: 'replay', response: existing.response } : { kind: 'reused' };
}

/** Stores the response in the same transaction as the change it describes. */
export async function storeResponse(trx: Transaction<DB>, scope: KeyScope, key: string, response: unknown): Promise<void> {
  await trx
    .updateTable('idempotency_keys')
    .set({ response: JSON.stringify(response) })
    .where('tenant_id', '=', scope.tenantId)
    .where('user_id', '=', scope.userId)
    .where('role', '=', scope.role)
    .where('key', '=', key)
    .execute();
}

/** Deletes up to `limit` expired keys; returns how many. */
export async function deleteExpiredKeys(db: Kysely<DB> | Transaction<DB>, limit: number): Promise<number> {
  const result = await sql`
    delete from idempotency_keys
     where ctid in (select ctid from idempotency_keys where expires_at <= now() limit ${limit})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
