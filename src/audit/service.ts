import type { Kysely, Transaction } from 'kysely';
import type { AuditLogRow, DB } from '../db/schema.js';

export interface AuditEntry {
  tenantId: string;
  actorUserId: string | null;
  role: string;
  operation: string;
  entityIds: string[];
  requestId: string;
}

export interface AuditRecord extends AuditEntry {
  id: number;
  createdAt: Date;
}

/** Written in the mutation's own transaction: a rollback takes it away with the change. */
export async function writeAudit(trx: Transaction<DB>, entry: AuditEntry): Promise<void> {
  await trx
    .insertInto('audit_log')
    .values({
      tenant_id: entry.tenantId,
      actor_user_id: entry.actorUserId,
      role: entry.role,
      operation: entry.operation,
      entity_ids: entry.entityIds,
      request_id: entry.requestId,
    })
    .execute();
}

const toRecord = (row: AuditLogRow): AuditRecord => ({
  id: row.id,
  tenantId: row.tenant_id,
  actorUserId: row.actor_user_id,
  role: row.role,
  operation: row.operation,
  entityIds: row.entity_ids,
  requestId: row.request_id,
  createdAt: row.created_at,
});

/** A tenant's rows (every tenant's with null), oldest first, after the row id `after`. */
export async function listAudit(db: Kysely<DB>, tenantId: string | null, limit: number, after: number | null): Promise<AuditRecord[]> {
  let query = db.selectFrom('audit_log').selectAll().orderBy('id').limit(limit);
  if (tenantId !== null) query = query.where('tenant_id', '=', tenantId);
  if (after !== null) query = query.where('id', '>', after);
  return (await query.execute()).map(toRecord);
}
