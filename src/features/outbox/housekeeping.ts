import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';

/** What operators and the loops do with the outbox besides relaying it: counts, cleanup of sent events, requeue of dead ones. */

export interface OutboxStats {
  pending: number;
  dead: number;
  oldestPendingAgeSeconds: number | null;
}

/**
 * Pending and dead counts and the age of the oldest pending event, for one tenant or all.
 *
 * @example const stats = await outboxStats(db, tenantId)
 */
export async function outboxStats(db: Kysely<DB>, tenantId: string | null): Promise<OutboxStats> {
  let query = db
    .selectFrom('outbox_events')
    .select([
      sql<number>`count(*) filter (where status = 'pending')::int`.as('pending'),
      sql<number>`count(*) filter (where status = 'dead')::int`.as('dead'),
      sql<number | null>`extract(epoch from now() - min(created_at) filter (where status = 'pending'))::float8`.as('oldest'),
    ])
    .where('status', 'in', ['pending', 'dead']);
  if (tenantId !== null) query = query.where('tenant_id', '=', tenantId);
  const row = await query.executeTakeFirstOrThrow();
  return { pending: row.pending, dead: row.dead, oldestPendingAgeSeconds: row.oldest };
}

/**
 * Deletes up to `limit` events sent more than `olderThanHours` ago (OUTBOX_RETENTION_HOURS);
 * pending and dead events are never deleted. No request touches a sent event, and SKIP LOCKED
 * passes over any row another pass holds, so the delete waits for nobody and nobody for it.
 *
 * @example const deleted = await deleteSentEvents(trx, 24 * 7, 1000)
 */
export async function deleteSentEvents(trx: Transaction<DB>, olderThanHours: number, limit: number): Promise<number> {
  const result = await sql`
    delete from outbox_events e
     using (select tenant_id, id from outbox_events
             where status = 'sent' and sent_at < now() - make_interval(hours => ${olderThanHours})
             order by sent_at
             limit ${limit}
             for update skip locked) old
     where e.tenant_id = old.tenant_id and e.id = old.id`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}

export interface RequeueFilter {
  tenantId?: string;
  topic?: string;
  /** Only events written at least this long ago. */
  olderThanMs?: number;
  /** Only events written at most this long ago. */
  newerThanMs?: number;
}

/** Dead events given back per statement: a big backlog is requeued in short statements. */
const REQUEUE_BATCH = 1_000;

function deadEvents(db: Kysely<DB> | Transaction<DB>, filter: RequeueFilter) {
  let query = db.selectFrom('outbox_events').where('status', '=', 'dead');
  if (filter.tenantId !== undefined) query = query.where('tenant_id', '=', filter.tenantId);
  if (filter.topic !== undefined) query = query.where('topic', '=', filter.topic);
  if (filter.olderThanMs !== undefined)
    query = query.where('created_at', '<=', sql<Date>`now() - make_interval(secs => ${filter.olderThanMs / 1000})`);
  if (filter.newerThanMs !== undefined)
    query = query.where('created_at', '>=', sql<Date>`now() - make_interval(secs => ${filter.newerThanMs / 1000})`);
  return query;
}

/**
 * How many dead events match `filter`.
 *
 * @example const dead = await countDead(db, { tenantId, topic: 'coupon.issued' })
 */
export async function countDead(db: Kysely<DB>, filter: RequeueFilter): Promise<number> {
  const row = await deadEvents(db, filter)
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

/**
 * Gives dead events matching `filter` back to the relay: pending, due now, with a fresh time
 * budget (OUTBOX_RETRY_FOR counts from `requeued_at`) and no attempts. Returns how many.
 *
 * @example const requeued = await requeueDead(db, { tenantId, topic: 'coupon.issued' })
 */
export async function requeueDead(db: Kysely<DB>, filter: RequeueFilter): Promise<number> {
  let total = 0;
  for (;;) {
    const result = await sql`
      update outbox_events e
         set status = 'pending', attempts = 0, next_attempt_at = now(), requeued_at = now(), claim_id = null
        from (${deadEvents(db, filter).select(['tenant_id', 'id']).limit(REQUEUE_BATCH)}) d
       where e.tenant_id = d.tenant_id and e.id = d.id and e.status = 'dead'`.execute(db);
    const changed = Number(result.numAffectedRows ?? 0);
    total += changed;
    if (changed < REQUEUE_BATCH) return total;
  }
}
