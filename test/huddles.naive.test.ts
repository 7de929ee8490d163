import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupHuddlesNaive, heartbeatHuddleNaive, joinHuddleNaive, leaveHuddleNaive } from './naive/huddles.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { cleanupAgainstJoin, describeRace, heartbeatAgainstLeave, RACE_ROUNDS, simultaneousFirstJoins } from './support/huddle-races.js';

// The races of huddles.concurrency.test.ts against the load-decide-save versions: every race must show.

describe('the huddle races against the naive versions', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    const huddleOperations = {
      joinHuddle: joinHuddleNaive,
      heartbeatHuddle: heartbeatHuddleNaive,
      leaveHuddle: leaveHuddleNaive,
      cleanupHuddles: cleanupHuddlesNaive,
    };
    backend = await createTestBackend({ env: { HUDDLE_STALE_AFTER_MS: '60000' }, standIns: { huddleOperations } });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('heartbeat against leave: the full-row save brings members back', async ({ annotate }) => {
    const result = await heartbeatAgainstLeave(backend, 'naive-hb', RACE_ROUNDS.heartbeatAgainstLeave);
    await annotate(describeRace('naive heartbeat vs leave', result));
    expect(result.failedRounds).toBeGreaterThan(0);
  });

  it('cleanup against join: the unlocked count ends sessions someone just joined', async ({ annotate }) => {
    const result = await cleanupAgainstJoin(backend, 'naive-cj', RACE_ROUNDS.cleanupAgainstJoin);
    await annotate(describeRace('naive cleanup vs join', result));
    expect(result.failedRounds).toBeGreaterThan(0);
  });

  it('20 first joins: check-then-insert does not end with one session holding all 20', async ({ annotate }) => {
    const result = await simultaneousFirstJoins(backend, 'naive-fj', RACE_ROUNDS.firstJoins, 20);
    await annotate(describeRace('naive 20 first joins', result));
    expect(result.failedRounds).toBeGreaterThan(0);
  });
});
