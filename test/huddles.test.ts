import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { startBackend } from '../src/entry/backend.js';
import {
  CleanupHuddlesDocument,
  HeartbeatHuddleDocument,
  HuddleDocument,
  JoinHuddleDocument,
  LeaveHuddleDocument,
} from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'team';

describe('huddles', () => {
  let backend: TestBackend;
  const send = (member: string, tenant = TENANT) => asUser(tenant, member);
  const join = async (member: string, objectiveId: string, tenant = TENANT) =>
    (await gqlOk(backend.app.fetch, JoinHuddleDocument, { input: { objectiveId } }, send(member, tenant))).joinHuddle;
  const leave = async (member: string, objectiveId: string) =>
    (await gqlOk(backend.app.fetch, LeaveHuddleDocument, { input: { objectiveId } }, send(member))).leaveHuddle;
  const heartbeat = async (member: string, objectiveId: string) =>
    (await gqlOk(backend.app.fetch, HeartbeatHuddleDocument, { input: { objectiveId } }, send(member))).heartbeatHuddle;
  const members = (result: { session?: { participants: { memberId: string }[] } | null }) =>
    result.session?.participants.map((p) => p.memberId);
  const makeStale = (member: string) =>
    backend.sql.query(
      "update huddle_participants set last_heartbeat_at = now() - interval '10 minutes' where tenant_id = $1 and member_id = $2",
      [TENANT, member],
    );

  beforeAll(async () => {
    backend = await createTestBackend({ env: { HUDDLE_STALE_AFTER_MS: '60000' } });
    await createTenant(backend, TENANT);
    await createTenant(backend, 'other-team');
  });
  afterAll(() => backend.close());

  it('starts a session on the first join; joining again changes nothing; the last leave ends it', async () => {
    const first = await join('ann', 'standup');
    expect(first.status).toBe('JOINED');
    const again = await join('ann', 'standup');
    expect(again.status).toBe('ALREADY_JOINED');
    expect(again.session?.id).toBe(first.session?.id);
    const second = await join('ben', 'standup');
    expect(members(second)).toEqual(['ann', 'ben']);

    const annLeaves = await leave('ann', 'standup');
    expect(annLeaves).toMatchObject({ status: 'LEFT', session: { endedAt: null } });
    expect(members(annLeaves)).toEqual(['ben']);
    const benLeaves = await leave('ben', 'standup');
    expect(benLeaves.status).toBe('LEFT');
    expect(benLeaves.session?.endedAt).not.toBeNull();
    const read = await gqlOk(backend.app.fetch, HuddleDocument, { objectiveId: 'standup' }, asUser(TENANT, 'ann'));
    expect(read.huddle).toBeNull();

    const next = await join('ann', 'standup');
    expect(next.session?.id).not.toBe(first.session?.id);
  });

  it('records heartbeats of members only, and says NOT_IN_HUDDLE otherwise', async () => {
    await join('cat', 'review');
    expect((await heartbeat('cat', 'review')).status).toBe('HEARTBEAT_RECORDED');
    expect((await heartbeat('dan', 'review')).status).toBe('NOT_IN_HUDDLE');
    expect((await heartbeat('dan', 'no-such-objective')).status).toBe('NOT_IN_HUDDLE');
    await leave('cat', 'review');
    expect((await heartbeat('cat', 'review')).status).toBe('NOT_IN_HUDDLE');
    expect((await leave('cat', 'review')).status).toBe('NOT_IN_HUDDLE');
  });

  it('cleanup removes a stale member, keeps a fresh one, and ends a session left empty', async () => {
    await join('eve', 'planning');
    await join('fay', 'planning');
    await join('gus', 'retro');
    await makeStale('eve');
    await makeStale('gus');
    const cleaned = await gqlOk(backend.app.fetch, CleanupHuddlesDocument, {}, asTenantAdmin(TENANT));
    expect(cleaned.cleanupHuddles).toEqual({ participantsRemoved: 2, sessionsEnded: 1 });
    const planning = await gqlOk(backend.app.fetch, HuddleDocument, { objectiveId: 'planning' }, asUser(TENANT, 'fay'));
    expect(planning.huddle?.participants.map((p) => p.memberId)).toEqual(['fay']);
    const retro = await gqlOk(backend.app.fetch, HuddleDocument, { objectiveId: 'retro' }, asUser(TENANT, 'gus'));
    expect(retro.huddle).toBeNull();
    expect((await heartbeat('eve', 'planning')).status).toBe('NOT_IN_HUDDLE');
    expect(errorCodes(await gql(backend.app.fetch, CleanupHuddlesDocument, {}, asUser(TENANT, 'fay')))).toEqual(['FORBIDDEN']);
  });

  it("keeps another tenant's objective with the same id a different session", async () => {
    const ours = await join('hal', 'shared-name');
    const theirs = await join('hal', 'shared-name', 'other-team');
    expect(theirs.session?.id).not.toBe(ours.session?.id);
    expect(members(theirs)).toEqual(['hal']);
    await leave('hal', 'shared-name');
    const stillTheirs = await gqlOk(backend.app.fetch, HuddleDocument, { objectiveId: 'shared-name' }, asUser('other-team', 'x'));
    expect(stillTheirs.huddle?.id).toBe(theirs.session?.id);
  });

  it('refuses an empty objective id and a session without a member', async () => {
    expect(errorCodes(await gql(backend.app.fetch, JoinHuddleDocument, { input: { objectiveId: ' ' } }, asUser(TENANT, 'x')))).toEqual([
      'BAD_USER_INPUT',
    ]);
    expect(errorCodes(await gql(backend.app.fetch, JoinHuddleDocument, { input: { objectiveId: 'a' } }, asTenantAdmin(TENANT)))).toEqual([
      'FORBIDDEN',
    ]);
  });

  it('the worker inside npm start cleans stale huddles on its interval', async () => {
    await join('ivy', 'nightly');
    await makeStale('ivy');
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: backend.databaseUrl,
      PORT: '0',
      HUDDLE_CLEANUP_INTERVAL_MS: '50',
      HUDDLE_STALE_AFTER_MS: '60000',
    });
    const running = await startBackend({ config, log: backend.log, host: '127.0.0.1' });
    try {
      const active = async () => (await gqlOk(backend.app.fetch, HuddleDocument, { objectiveId: 'nightly' }, asUser(TENANT, 'ivy'))).huddle;
      for (const deadline = Date.now() + 10_000; (await active()) !== null && Date.now() < deadline;) await sleep(50);
      expect(await active()).toBeNull();
    } finally {
      await running.stop();
    }
  });
});
