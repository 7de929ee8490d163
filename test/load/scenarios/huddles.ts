import { print } from 'graphql';
import type pg from 'pg';
import { CreateTenantDocument, HeartbeatHuddleDocument, JoinHuddleDocument, LeaveHuddleDocument } from '../../generated/graphql.js';
import type { LoadClient } from '../client.js';
import { replyOutcome, type LoadScenario } from '../scenario.js';
import type { Session } from './coupons.js';

const STEPS = [JoinHuddleDocument, HeartbeatHuddleDocument, HeartbeatHuddleDocument, LeaveHuddleDocument].map((d) => print(d));

/**
 * `objectives` huddles with `perObjective` members each. Member k's requests go join, heartbeat,
 * heartbeat, leave, round after round, while every other member does the same at once.
 * Holds when no objective has two active sessions and no ended session keeps a member.
 */
export function huddlesScenario(runId: string, objectives: number, perObjective: number, total: number | null): LoadScenario {
  const tenantId = `huddles-${runId}`;
  const members = objectives * perObjective;
  return {
    name: 'huddles',
    async setup(client: LoadClient, sessions: Session) {
      const reply = await client.mutation(print(CreateTenantDocument), { input: { id: tenantId, name: tenantId } }, sessions.operator);
      if (reply.body.errors?.length) throw new Error(`createTenant failed: ${JSON.stringify(reply.body.errors)}`);
    },
    request(index, client, sessions) {
      if (total !== null && index >= total) return null;
      const member = index % members;
      const step = STEPS[Math.floor(index / members) % STEPS.length]!;
      const objectiveId = `objective-${member % objectives}`;
      return () => client.graphql(step, { input: { objectiveId } }, sessions.member(tenantId, `member-${member}`));
    },
    outcomeOf: replyOutcome,
    async check(sql: pg.Pool) {
      const count = async (text: string) => (await sql.query<{ n: number }>(text, [tenantId])).rows[0]!.n;
      const active = await count('select count(*)::int as n from huddle_sessions where tenant_id = $1 and ended_at is null');
      const ended = await count('select count(*)::int as n from huddle_sessions where tenant_id = $1 and ended_at is not null');
      const doubled = await count(`select count(*)::int as n from (select objective_id from huddle_sessions
          where tenant_id = $1 and ended_at is null group by objective_id having count(*) > 1) d`);
      const endedWithMembers =
        await count(`select count(*)::int as n from huddle_sessions s where s.tenant_id = $1 and s.ended_at is not null
           and exists (select 1 from huddle_participants p where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null)`);
      const emptyActive = await count(`select count(*)::int as n from huddle_sessions s where s.tenant_id = $1 and s.ended_at is null
           and not exists (select 1 from huddle_participants p where p.tenant_id = s.tenant_id and p.session_id = s.id and p.left_at is null)`);
      return [
        {
          invariant: 'at most one active session per objective',
          counted: `${active} active sessions over ${objectives} objectives, ${doubled} objectives with two`,
          violations: doubled > 0 ? [`${doubled} objectives with two active sessions`] : [],
        },
        {
          invariant: 'a leave is never undone: an ended session holds nobody',
          counted: `${ended} ended sessions, ${endedWithMembers} still holding members`,
          violations: endedWithMembers > 0 ? [`${endedWithMembers} ended sessions still hold members`] : [],
        },
        {
          invariant: 'an active session has someone in it',
          counted: `${active} active sessions, ${emptyActive} with nobody in them`,
          violations: emptyActive > 0 ? [`${emptyActive} active sessions with nobody in them`] : [],
        },
      ];
    },
  };
}
