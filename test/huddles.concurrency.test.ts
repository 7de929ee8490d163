import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { cleanupAgainstJoin, describeRace, heartbeatAgainstLeave, RACE_ROUNDS, simultaneousFirstJoins } from './support/huddle-races.js';

describe('huddle races, released together round after round', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { HUDDLE_STALE_AFTER_MS: '60000' } });
  });
  afterAll(() => backend.close());

  it('heartbeat against leave: a member who left is never present again', async ({ annotate }) => {
    const result = await heartbeatAgainstLeave(backend, 'race-hb', RACE_ROUNDS.heartbeatAgainstLeave);
    await annotate(describeRace('heartbeat vs leave', result));
    expect(result.details).toEqual([]);
    expect(result.failedRounds).toBe(0);
  });

  it('cleanup against join: no ended session keeps a member, no join is answered with an ended session', async ({ annotate }) => {
    const result = await cleanupAgainstJoin(backend, 'race-cj', RACE_ROUNDS.cleanupAgainstJoin);
    await annotate(describeRace('cleanup vs join', result));
    expect(result.details).toEqual([]);
  });

  it('20 members joining a new objective at once: exactly one active session with all 20', async ({ annotate }) => {
    const result = await simultaneousFirstJoins(backend, 'race-fj', RACE_ROUNDS.firstJoins, 20);
    await annotate(describeRace('20 first joins', result));
    expect(result.details).toEqual([]);
  });
});
