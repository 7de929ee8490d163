import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';

/**
 * Huddles' cleanup: stale participants removed and empty sessions ended, objective by objective
 * under its lock (which join and leave take too), and ended sessions deleted after a while.
 */

/**
 * Join, leave and cleanup of one objective take turns on this transaction-level lock, so a cleanup that finds a session
 * empty and a join into it cannot interleave. The key hashes (tenant, objective) to 64 bits: a collision only shares turns.
 *
 * @example await lockObjective(trx, tenantId, objectiveId)
 */
export async function lockObjective(trx: Transaction<DB>, tenantId: string, objectiveId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${tenantId} || chr(31) || ${objectiveId}, 0))`.execute(trx);
}

export function activeSessionRow(db: Kysely<DB> | Transaction<DB>, tenantId: string, objectiveId: string) {
  return db
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('objective_id', '=', objectiveId)
    .where('ended_at', 'is', null)
    .executeTakeFirst();
}

/**
 * Ends the session when nobody is left in it; true when it did. Caller holds the objective lock.
 *
 * @example const ended = await endIfEmpty(trx, tenantId, sessionId)
 */
export async function endIfEmpty(trx: Transaction<DB>, tenantId: string, sessionId: string): Promise<boolean> {
  const ended = await sql`
    update huddle_sessions s set ended_at = now()
     where s.tenant_id = ${tenantId} and s.id = ${sessionId} and s.ended_at is null
       and not exists (select 1 from huddle_participants p
                        where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null)
    returning s.id`.execute(trx);
  return ended.rows.length === 1;
}

/**
 * What a huddle cleanup's audit row names: nothing (it touches many sessions).
 *
 * @example cleanupEntities() // []
 */
export const cleanupEntities = (): string[] => [];

export interface CleanupResult {
  participantsRemoved: number;
  sessionsEnded: number;
}

export interface StaleObjective {
  tenantId: string;
  objectiveId: string;
}

/**
 * Active sessions that cleanup must look at: those with a participant whose heartbeat is older
 * than `staleAfterMs`, and those with nobody left in them. A plain read: each candidate is
 * re-checked under its objective's lock.
 *
 * @example const stale = await staleObjectives(trx, tenantId, staleAfterMs, 100)
 */
export async function staleObjectives(
  db: Kysely<DB> | Transaction<DB>,
  tenantId: string | null,
  staleAfterMs: number,
  limit: number,
): Promise<StaleObjective[]> {
  const rows = await sql<{ tenant_id: string; objective_id: string }>`
    select s.tenant_id, s.objective_id from huddle_sessions s
     where s.ended_at is null
       and (${tenantId}::text is null or s.tenant_id = ${tenantId})
       and (exists (select 1 from huddle_participants p
                     where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null
                       and p.last_heartbeat_at < now() - make_interval(secs => ${staleAfterMs / 1000}))
            or not exists (select 1 from huddle_participants p
                            where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null))
     order by s.tenant_id, s.objective_id
     limit ${limit}`.execute(db);
  return rows.rows.map((r) => ({ tenantId: r.tenant_id, objectiveId: r.objective_id }));
}

/**
 * One objective's cleanup, under its lock: marks participants with a stale heartbeat as left and
 * ends the session when nobody is left. A join waits for the lock, then finds either the session
 * still running (with its new member) or no active session (and starts one).
 *
 * @example const result = await cleanupObjective(trx, stale[0], staleAfterMs)
 */
async function cleanupObjective(trx: Transaction<DB>, objective: StaleObjective, staleAfterMs: number): Promise<CleanupResult> {
  const { tenantId, objectiveId } = objective;
  await lockObjective(trx, tenantId, objectiveId);
  const session = await activeSessionRow(trx, tenantId, objectiveId);
  if (!session) return { participantsRemoved: 0, sessionsEnded: 0 };
  const removed = await sql`
    update huddle_participants set left_at = now()
     where tenant_id = ${tenantId} and session_id = ${session.id} and left_at is null
       and last_heartbeat_at < now() - make_interval(secs => ${staleAfterMs / 1000})
    returning member_id`.execute(trx);
  const ended = await endIfEmpty(trx, tenantId, session.id);
  return { participantsRemoved: removed.rows.length, sessionsEnded: ended ? 1 : 0 };
}

/**
 * One cleanup pass over up to `limit` objectives (one tenant's, or every tenant's with null), in
 * one transaction. Objective locks are taken in (tenant, objective) order, so two passes cannot
 * deadlock each other, and a join or leave only ever holds one of them.
 *
 * @example await cleanupHuddles(trx, tenantId, staleAfterMs, 100)
 */
export async function cleanupHuddles(
  trx: Transaction<DB>,
  tenantId: string | null,
  staleAfterMs: number,
  limit: number,
): Promise<CleanupResult & { objectives: number }> {
  const objectives = await staleObjectives(trx, tenantId, staleAfterMs, limit);
  const total = { participantsRemoved: 0, sessionsEnded: 0, objectives: objectives.length };
  for (const objective of objectives) {
    const result = await cleanupObjective(trx, objective, staleAfterMs);
    total.participantsRemoved += result.participantsRemoved;
    total.sessionsEnded += result.sessionsEnded;
  }
  return total;
}

export interface DeletedSessions {
  sessions: number;
  participants: number;
}

/**
 * Deletes up to `limit` sessions that ended more than `olderThanHours` ago (HUDDLE_RETENTION_HOURS),
 * with their participants. Join, heartbeat, leave and cleanup touch only active sessions, and
 * SKIP LOCKED passes over rows another pass holds, so the delete waits for nobody.
 *
 * @example const { sessions, participants } = await deleteEndedSessions(trx, 24 * 30, 1000)
 */
export async function deleteEndedSessions(trx: Transaction<DB>, olderThanHours: number, limit: number): Promise<DeletedSessions> {
  const { rows } = await sql<{ sessions: number; participants: number }>`
    with old as (
      select tenant_id, id from huddle_sessions
       where ended_at < now() - make_interval(hours => ${olderThanHours})
       order by ended_at
       limit ${limit}
       for update skip locked
    ), gone_participants as (
      delete from huddle_participants p using old where p.tenant_id = old.tenant_id and p.session_id = old.id returning 1
    ), gone_sessions as (
      delete from huddle_sessions s using old where s.tenant_id = old.tenant_id and s.id = old.id returning 1
    )
    select (select count(*)::int from gone_sessions) as sessions, (select count(*)::int from gone_participants) as participants`.execute(
    trx,
  );
  return rows[0]!;
}
