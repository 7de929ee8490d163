import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Transaction } from 'kysely';
import type { DB } from '../../src/db/schema.js';
import type { CleanupResult } from '../../src/features/huddles/cleanup.js';
import type { HuddleResult, HuddleSession } from '../../src/features/huddles/service.js';

/**
 * The huddle code this project replaced, kept to prove the race tests can fail. Each operation
 * loads rows, decides in TypeScript and saves whole rows back, with no lock on the objective:
 *   - heartbeat saves the participant row it read, undoing a leave that committed in between;
 *   - cleanup counts the members, then ends the session, while a join adds one in between;
 *   - two first joiners both find no session and both start one.
 * THINK_MS stands in for the work an ORM does between its load and its save.
 */
const THINK_MS = 3;
const think = () => sleep(Math.random() * THINK_MS);

interface Member {
  tenantId: string;
  memberId: string;
  objectiveId: string;
}

async function load(trx: Transaction<DB>, tenantId: string, sessionId: string): Promise<HuddleSession> {
  const row = await trx
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', sessionId)
    .executeTakeFirstOrThrow();
  const participants = await trx
    .selectFrom('huddle_participants')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', sessionId)
    .where('left_at', 'is', null)
    .execute();
  return {
    id: row.id,
    objectiveId: row.objective_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    participants: participants.map((p) => ({ memberId: p.member_id, joinedAt: p.joined_at, lastHeartbeatAt: p.last_heartbeat_at })),
  };
}

const findActive = (trx: Transaction<DB>, tenantId: string, objectiveId: string) =>
  trx
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('objective_id', '=', objectiveId)
    .where('ended_at', 'is', null)
    .executeTakeFirst();

export async function joinHuddleNaive(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  let session = await findActive(trx, tenantId, objectiveId);
  await think();
  session ??= await trx
    .insertInto('huddle_sessions')
    .values({ tenant_id: tenantId, objective_id: objectiveId })
    .returningAll()
    .executeTakeFirstOrThrow();
  await trx
    .insertInto('huddle_participants')
    .values({ tenant_id: tenantId, session_id: session.id, member_id: memberId })
    .onConflict((oc) => oc.columns(['tenant_id', 'session_id', 'member_id']).doUpdateSet({ left_at: null }))
    .execute();
  return { status: 'JOINED', session: await load(trx, tenantId, session.id) };
}

export async function heartbeatHuddleNaive(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  const session = await findActive(trx, tenantId, objectiveId);
  if (!session) return { status: 'NOT_IN_HUDDLE', session: null };
  const row = await trx
    .selectFrom('huddle_participants')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', session.id)
    .where('member_id', '=', memberId)
    .executeTakeFirst();
  if (!row || row.left_at !== null) return { status: 'NOT_IN_HUDDLE', session: await load(trx, tenantId, session.id) };
  await think();
  // The full-row save: every column written back as it was read, plus the new heartbeat.
  await trx
    .updateTable('huddle_participants')
    .set({ joined_at: row.joined_at, left_at: row.left_at, last_heartbeat_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', session.id)
    .where('member_id', '=', memberId)
    .execute();
  return { status: 'HEARTBEAT_RECORDED', session: await load(trx, tenantId, session.id) };
}

export async function leaveHuddleNaive(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  const session = await findActive(trx, tenantId, objectiveId);
  if (!session) return { status: 'NOT_IN_HUDDLE', session: null };
  await trx
    .updateTable('huddle_participants')
    .set({ left_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', session.id)
    .where('member_id', '=', memberId)
    .execute();
  const remaining = await load(trx, tenantId, session.id);
  if (remaining.participants.length === 0) {
    await trx
      .updateTable('huddle_sessions')
      .set({ ended_at: sql<Date>`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', session.id)
      .execute();
  }
  return { status: 'LEFT', session: await load(trx, tenantId, session.id) };
}

export async function cleanupHuddlesNaive(
  trx: Transaction<DB>,
  tenantId: string | null,
  staleAfterMs: number,
): Promise<CleanupResult & { objectives: number }> {
  const sessions = await trx
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('ended_at', 'is', null)
    .$if(tenantId !== null, (q) => q.where('tenant_id', '=', tenantId!))
    .execute();
  const total = { participantsRemoved: 0, sessionsEnded: 0, objectives: sessions.length };
  for (const session of sessions) {
    const removed = await sql`
      update huddle_participants set left_at = now()
       where tenant_id = ${session.tenant_id} and session_id = ${session.id} and left_at is null
         and last_heartbeat_at < now() - make_interval(secs => ${staleAfterMs / 1000})
      returning member_id`.execute(trx);
    total.participantsRemoved += removed.rows.length;
    const present = await load(trx, session.tenant_id, session.id);
    await think();
    if (present.participants.length === 0) {
      await trx
        .updateTable('huddle_sessions')
        .set({ ended_at: sql<Date>`now()` })
        .where('tenant_id', '=', session.tenant_id)
        .where('id', '=', session.id)
        .execute();
      total.sessionsEnded++;
    }
  }
  return total;
}
