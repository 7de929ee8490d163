import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Slots } from '../../db/prepared.js';
import type { AuditLogRow, DB } from '../../db/schema.js';

interface AuditEntry {
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

/** The audit row's values as a statement binds them (`auditTenantId`: the statement may bind another tenant id too). */
export interface AuditValues {
  auditTenantId: string;
  actorUserId: string | null;
  role: string;
  operation: string;
  entityIds: string[];
  requestId: string;
}

/**
 * The audit row as the CTE `audit_row` of a statement the mutation runs anyway, written when
 * `when` holds. It rides in the mutation's own transaction: a rollback takes it away with the change.
 *
 * @example sql`with ${auditRowCte(p, sql`exists (select 1 from inserted)`)} select 1`
 */
export function auditRowCte(p: Slots<AuditValues>, when: RawBuilder<unknown>) {
  return sql`audit_row as (
    insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
    select ${p.auditTenantId}, ${p.actorUserId}, ${p.role}, ${p.operation}, ${p.entityIds}::text[], ${p.requestId}
     where ${when})`;
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

/**
 * A tenant's rows (every tenant's with null), oldest first, after the row id `after`.
 *
 * @example const rows = await listAudit(trx, tenantId, 50, null)
 */
export async function listAudit(db: Kysely<DB>, tenantId: string | null, limit: number, after: number | null): Promise<AuditRecord[]> {
  let query = db.selectFrom('audit_log').selectAll().orderBy('id').limit(limit);
  if (tenantId !== null) query = query.where('tenant_id', '=', tenantId);
  if (after !== null) query = query.where('id', '>', after);
  return (await query.execute()).map(toRecord);
}
