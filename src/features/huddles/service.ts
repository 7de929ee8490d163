import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, HuddleParticipantRow, HuddleSessionRow } from '../../db/schema.js';
import { activeSessionRow, cleanupHuddles, endIfEmpty, lockObjective, type CleanupResult } from './cleanup.js';

export interface Participant {
  memberId: string;
  joinedAt: Date;
  lastHeartbeatAt: Date;
}

export interface HuddleSession {
  id: string;
  objectiveId: string;
  startedAt: Date;
  endedAt: Date | null;
  /** Those who have not left. */
  participants: Participant[];
}

type HuddleStatus = 'JOINED' | 'ALREADY_JOINED' | 'HEARTBEAT_RECORDED' | 'LEFT' | 'NOT_IN_HUDDLE';

export interface HuddleResult {
  status: HuddleStatus;
  session: HuddleSession | null;
}

/**
 * What the audit row names: a member's huddle (when there is one); none for a cleanup pass, which ends any number.
 *
 * @example huddleEntities(result) // [sessionId] or []
 */
export const huddleEntities = ({ session }: HuddleResult): string[] => (session ? [session.id] : []);
interface Member {
  tenantId: string;
  memberId: string;
  objectiveId: string;
}

const toParticipant = (row: HuddleParticipantRow): Participant => ({
  memberId: row.member_id,
  joinedAt: row.joined_at,
  lastHeartbeatAt: row.last_heartbeat_at,
});

async function loadSession(db: Kysely<DB> | Transaction<DB>, row: HuddleSessionRow): Promise<HuddleSession> {
  const participants = await db
    .selectFrom('huddle_participants')
    .selectAll()
    .where('tenant_id', '=', row.tenant_id)
    .where('session_id', '=', row.id)
    .where('left_at', 'is', null)
    .orderBy('joined_at')
    .orderBy('member_id')
    .execute();
  return {
    id: row.id,
    objectiveId: row.objective_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    participants: participants.map(toParticipant),
  };
}

/**
 * The objective's active session, or null.
 *
 * @example const session = await findActiveSession(trx, tenantId, objectiveId)
 */
export async function findActiveSession(db: Kysely<DB>, tenantId: string, objectiveId: string): Promise<HuddleSession | null> {
  const row = await activeSessionRow(db, tenantId, objectiveId);
  return row ? loadSession(db, row) : null;
}

/**
 * Starts the objective's session when none is active. The partial unique index allows one active session per
 * objective: a start that loses that race waits for the winner, does nothing, and reads the winner's session.
 */
async function startOrFindSession(trx: Transaction<DB>, tenantId: string, objectiveId: string): Promise<HuddleSessionRow> {
  const existing = await activeSessionRow(trx, tenantId, objectiveId);
  if (existing) return existing;
  const started = await trx
    .insertInto('huddle_sessions')
    .values({ tenant_id: tenantId, objective_id: objectiveId })
    .onConflict((oc) => oc.columns(['tenant_id', 'objective_id']).where('ended_at', 'is', null).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (started) return started;
  const winner = await activeSessionRow(trx, tenantId, objectiveId);
  if (!winner) throw new Error(`no active huddle for ${objectiveId} after losing the start race`);
  return winner;
}

/**
 * Puts the member in the objective's active session, starting one when none is active. Joining a
 * session one is already in changes nothing and answers ALREADY_JOINED; a member who left and
 * comes back joins afresh.
 *
 * @example await joinHuddle(trx, { tenantId, memberId, objectiveId })
 */
async function joinHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  await lockObjective(trx, tenantId, objectiveId);
  const session = await startOrFindSession(trx, tenantId, objectiveId);
  const joined = await sql<{ fresh: boolean }>`
    insert into huddle_participants (tenant_id, session_id, member_id) values (${tenantId}, ${session.id}, ${memberId})
    on conflict (tenant_id, session_id, member_id) do update
      set left_at = null, joined_at = now(), last_heartbeat_at = now()
      where huddle_participants.left_at is not null
    returning true as fresh`.execute(trx);
  return { status: joined.rows.length === 1 ? 'JOINED' : 'ALREADY_JOINED', session: await loadSession(trx, session) };
}

/**
 * Records that the member is still there. A targeted UPDATE, never a save of a row read earlier:
 * its `left_at IS NULL` is re-checked after any wait for the row lock, so a heartbeat that races a
 * leave can never bring the member back. Needs no objective lock.
 *
 * @example await heartbeatHuddle(trx, { tenantId, memberId, objectiveId })
 */
async function heartbeatHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  const updated = await sql<{ session_id: string }>`
    update huddle_participants p set last_heartbeat_at = now()
      from huddle_sessions s
     where s.tenant_id = ${tenantId} and s.objective_id = ${objectiveId} and s.ended_at is null
       and p.tenant_id = s.tenant_id and p.session_id = s.id
       and p.member_id = ${memberId} and p.left_at is null
    returning p.session_id`.execute(trx);
  const session = await activeSessionRow(trx, tenantId, objectiveId);
  return {
    status: updated.rows.length === 1 ? 'HEARTBEAT_RECORDED' : 'NOT_IN_HUDDLE',
    session: session ? await loadSession(trx, session) : null,
  };
}

/**
 * Takes the member out of the objective's active session; the last one out ends it.
 *
 * @example await leaveHuddle(trx, { tenantId, memberId, objectiveId })
 */
async function leaveHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
  await lockObjective(trx, tenantId, objectiveId);
  const session = await activeSessionRow(trx, tenantId, objectiveId);
  if (!session) return { status: 'NOT_IN_HUDDLE', session: null };
  const left = await trx
    .updateTable('huddle_participants')
    .set({ left_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', session.id)
    .where('member_id', '=', memberId)
    .where('left_at', 'is', null)
    .returning('member_id')
    .executeTakeFirst();
  if (!left) return { status: 'NOT_IN_HUDDLE', session: await loadSession(trx, session) };
  await endIfEmpty(trx, tenantId, session.id);
  const after = await trx
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', session.id)
    .executeTakeFirstOrThrow();
  return { status: 'LEFT', session: await loadSession(trx, after) };
}

/** The huddle operations (AppServices.huddleOperations; buildServices takes a stand-in); the race tests stand the load-decide-save versions in for them. */
export const huddleOperations = { joinHuddle, heartbeatHuddle, leaveHuddle, cleanupHuddles };
export type HuddleOperations = typeof huddleOperations;

/** What cleanupHuddles asks for: one tenant's objectives (null: every tenant's), stale after how long, how many per pass. */
export interface CleanupRequest {
  tenantId: string | null;
  staleAfterMs: number;
  batchSize: number;
}

/**
 * cleanupHuddles' unit of work (runMutation calls it): one pass, as `operations` runs it (the original, or a race test's twin).
 *
 * @example await cleanupPass(trx, { tenantId: null, staleAfterMs, batchSize: 100 }, bookkeeping, huddleOperations)
 */
export async function cleanupPass(
  trx: Transaction<DB>,
  { tenantId, staleAfterMs, batchSize }: CleanupRequest,
  _bookkeeping: unknown,
  operations: HuddleOperations,
): Promise<CleanupResult> {
  const { participantsRemoved, sessionsEnded } = await operations.cleanupHuddles(trx, tenantId, staleAfterMs, batchSize);
  return { participantsRemoved, sessionsEnded };
}
