import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from './load/target.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { runPeriodRace, startRaceServers } from './support/period-race.js';

// The race of coupons.period.concurrency.slow.test.ts against processes that judge the period on their
// own clocks (the naive-clock strategy of test/load/strategies.ts: read-check-write, so its budget
// and counters may break too; what is asserted here is the clock's), one 400 ms ahead of the
// database's and one 400 ms behind it, as two hosts' clocks may be: coupons before the opening
// and after the end on the database's clock, issuedAt off the database's time.

describe('the instants a campaign opens and ends, naive: each process reads its own clock', () => {
  let backend: TestBackend;
  let servers: ServerProcess[];
  beforeAll(async () => {
    backend = await createTestBackend();
    servers = await startRaceServers(backend.databaseUrl, [
      { BENCH_STRATEGY: 'naive-clock', BENCH_CLOCK_SKEW_MS: '400' },
      { BENCH_STRATEGY: 'naive-clock', BENCH_CLOCK_SKEW_MS: '-400' },
    ]);
  });
  afterAll(async () => {
    for (const server of servers ?? []) await server.stop();
    await backend.close();
  });

  it("issues before startsAt and after endsAt by the database's clock, and stamps coupons with another time", async ({ annotate }) => {
    // The naive issue is slow in the opening's race (its transactions queue for the pool): the end comes once that is over.
    const result = await runPeriodRace(servers, backend.sql, 'period-naive', { budgetSlots: 1, budgetLeaseCoupons: 0 }, 5_000);
    await annotate(
      `naive clocks: opening ${JSON.stringify(result.opening)}, closing ${JSON.stringify(result.closing)}; ${result.violations.join('; ')}`,
    );
    const found = result.violations.join('\n');
    expect(found).toMatch(/coupons issued before startsAt on the database's clock/);
    expect(found).toMatch(/coupons issued at or after endsAt on the database's clock/);
    expect(found).toMatch(/coupons whose issuedAt is not their transaction's time/);
  });
});
