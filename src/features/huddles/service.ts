import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, HuddleParticipantRow, HuddleSessionRow } from '../../db/schema.js';

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

export type HuddleStatus = 'JOINED' | 'ALREADY_JOINED' | 'HEARTBEAT_RECORDED' | 'LEFT' | 'NOT_IN_HUDDLE';

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
/**
 * What a huddle cleanup's audit row names: nothing (it touches many sessions).
 *
 * @example cleanupEntities() // []
 */
export const cleanupEntities = (): string[] => [];
interface Member {
  tenantId: string;
  memberId: string;
  objectiveId: string;
}

/**
 * Join, leave and cleanup of one objective take turns on this transaction-scoped lock, so a cleanup that finds a session
 * empty and a join into it cannot interleave. The key hashes (tenant, objective) to 64 bits: a collision only shares turns.
 *
 * @example await lockObjective(trx, tenantId, objectiveId)
 */
export async function lockObjective(trx: Transaction<DB>, tenantId: string, objectiveId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${tenantId} || chr(31) || ${objectiveId}, 0))`.execute(trx);
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

function activeSessionRow(db: Kysely<DB> | Transaction<DB>, tenantId: string, objectiveId: string) {
  return db
    .selectFrom('huddle_sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('objective_id', '=', objectiveId)
    .where('ended_at', 'is', null)
    .executeTakeFirst();
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
export async function joinHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
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
export async function heartbeatHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
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

/** Ends the session when nobody is left in it; true when it did. Caller holds the objective lock. */
async function endIfEmpty(trx: Transaction<DB>, tenantId: string, sessionId: string): Promise<boolean> {
  const ended = await sql`
    update huddle_sessions s set ended_at = now()
     where s.tenant_id = ${tenantId} and s.id = ${sessionId} and s.ended_at is null
       and not exists (select 1 from huddle_participants p
                        where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null)
    returning s.id`.execute(trx);
  return ended.rows.length === 1;
}

/**
 * Takes the member out of the objective's active session; the last one out ends it.
 *
 * @example await leaveHuddle(trx, { tenantId, memberId, objectiveId })
 */
export async function leaveHuddle(trx: Transaction<DB>, { tenantId, memberId, objectiveId }: Member): Promise<HuddleResult> {
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
export async function cleanupObjective(trx: Transaction<DB>, objective: StaleObjective, staleAfterMs: number): Promise<CleanupResult> {
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
