import { CleanupHuddlesDocument, HeartbeatHuddleDocument, JoinHuddleDocument, LeaveHuddleDocument } from '../generated/graphql.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { asTenantAdmin, asUser, createTenant, gql, type TestBackend } from './harness.js';

/** Rounds per race; the naive versions must break in at least one of them. */
export const RACE_ROUNDS = { heartbeatAgainstLeave: 60, cleanupAgainstJoin: 60, firstJoins: 15 };

export interface RaceResult {
  rounds: number;
  /** Rounds in which the invariant broke. */
  failedRounds: number;
  details: string[];
}

const join = (backend: TestBackend, tenant: string, member: string, objectiveId: string) =>
  gql(backend.app.fetch, JoinHuddleDocument, { input: { objectiveId } }, asUser(tenant, member));

function record(result: RaceResult, failure: string | null) {
  if (failure === null) return;
  result.failedRounds++;
  if (result.details.length < 5) result.details.push(failure);
}

/**
 * A member leaves while their heartbeat is in flight, released together, round after round.
 * A second member keeps the session running. Broken when the member who left is present again.
 */
export async function heartbeatAgainstLeave(backend: TestBackend, tenant: string, rounds: number): Promise<RaceResult> {
  await createTenant(backend, tenant);
  const result: RaceResult = { rounds, failedRounds: 0, details: [] };
  for (let round = 0; round < rounds; round++) {
    const objectiveId = `hb-${round}`;
    await join(backend, tenant, 'stayer', objectiveId);
    await join(backend, tenant, 'leaver', objectiveId);
    const [left] = await Promise.all([
      gql(backend.app.fetch, LeaveHuddleDocument, { input: { objectiveId } }, asUser(tenant, 'leaver')),
      gql(backend.app.fetch, HeartbeatHuddleDocument, { input: { objectiveId } }, asUser(tenant, 'leaver')),
    ]);
    if (left.body.data?.leaveHuddle.status !== 'LEFT') {
      record(result, `round ${round}: leave answered ${JSON.stringify(left.body)}`);
      continue;
    }
    const present = await backend.sql.query(
      `select 1 from huddle_participants p join huddle_sessions s on s.tenant_id = p.tenant_id and s.id = p.session_id
        where p.tenant_id = $1 and s.objective_id = $2 and p.member_id = 'leaver' and p.left_at is null`,
      [tenant, objectiveId],
    );
    record(result, present.rowCount ? `round ${round}: the member who left is present again` : null);
  }
  return result;
}

/**
 * A cleanup pass and a join released together, on a session whose only member has gone stale.
 * Broken when a session ends with a member who has not left, or a join that succeeded answers
 * with a session that has already ended.
 */
export async function cleanupAgainstJoin(backend: TestBackend, tenant: string, rounds: number): Promise<RaceResult> {
  await createTenant(backend, tenant);
  const result: RaceResult = { rounds, failedRounds: 0, details: [] };
  for (let round = 0; round < rounds; round++) {
    const objectiveId = `cj-${round}`;
    await join(backend, tenant, 'sleeper', objectiveId);
    await backend.sql.query(
      `update huddle_participants p set last_heartbeat_at = now() - interval '1 hour'
         from huddle_sessions s
        where s.tenant_id = p.tenant_id and s.id = p.session_id and s.tenant_id = $1 and s.objective_id = $2`,
      [tenant, objectiveId],
    );
    const joinLead = staggerMs(round);
    const [, joined] = await Promise.all([
      sleep(Math.max(0, joinLead)).then(() => gql(backend.app.fetch, CleanupHuddlesDocument, {}, asTenantAdmin(tenant))),
      sleep(Math.max(0, -joinLead)).then(() => join(backend, tenant, 'newcomer', objectiveId)),
    ]);
    const answer = joined.body.data?.joinHuddle;
    const endedWithMember = await backend.sql.query(
      `select s.id from huddle_sessions s
        where s.tenant_id = $1 and s.objective_id = $2 and s.ended_at is not null
          and exists (select 1 from huddle_participants p where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null)`,
      [tenant, objectiveId],
    );
    const sessionOfAnswer = answer?.session
      ? await backend.sql.query('select ended_at from huddle_sessions where tenant_id = $1 and id = $2', [tenant, answer.session.id])
      : null;
    record(
      result,
      !answer
        ? `round ${round}: join failed: ${JSON.stringify(joined.body.errors)}`
        : endedWithMember.rowCount
          ? `round ${round}: a session ended with a member who has not left`
          : answer.session?.endedAt || sessionOfAnswer?.rows[0]?.ended_at
            ? `round ${round}: the join was answered with a session that has ended`
            : null,
    );
    // The newcomer leaves, so the next round's cleanup pass finds one session, not one per round.
    if (answer) await gql(backend.app.fetch, LeaveHuddleDocument, { input: { objectiveId } }, asUser(tenant, 'newcomer'));
  }
  return result;
}

/**
 * How far the join is sent ahead of the cleanup pass (negative: behind), swept over -6..6 ms.
 * The naive window is a few milliseconds wide, and where it sits against a common release
 * depends on the machine (which request reaches its first statement first), so the rounds try
 * both sides of it.
 */
const staggerMs = (round: number) => ((round % 7) - 3) * 2;

/** `members` members join a new objective at once. Broken unless one active session holds them all. */
export async function simultaneousFirstJoins(backend: TestBackend, tenant: string, rounds: number, members: number): Promise<RaceResult> {
  await createTenant(backend, tenant);
  const result: RaceResult = { rounds, failedRounds: 0, details: [] };
  for (let round = 0; round < rounds; round++) {
    const objectiveId = `fj-${round}`;
    const answers = await Promise.all(Array.from({ length: members }, (_, i) => join(backend, tenant, `m${i}`, objectiveId)));
    const sessions = await backend.sql.query<{ id: string; ended: boolean; present: number }>(
      `select s.id, s.ended_at is not null as ended,
              (select count(*)::int from huddle_participants p where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null) as present
         from huddle_sessions s where s.tenant_id = $1 and s.objective_id = $2`,
      [tenant, objectiveId],
    );
    const answeredIds = new Set(answers.map((a) => a.body.data?.joinHuddle.session?.id ?? 'error'));
    const only = sessions.rows[0];
    record(
      result,
      sessions.rows.length !== 1
        ? `round ${round}: ${sessions.rows.length} sessions for one objective`
        : only!.ended || only!.present !== members
          ? `round ${round}: the session holds ${only!.present} of ${members} members`
          : answeredIds.size !== 1 || !answeredIds.has(only!.id)
            ? `round ${round}: joins were answered with ${[...answeredIds].join(', ')}`
            : null,
    );
  }
  return result;
}

export function describeRace(name: string, result: RaceResult): string {
  return `${name}: ${result.failedRounds} of ${result.rounds} rounds broken${result.details.length ? ` (${result.details.join('; ')})` : ''}`;
}
