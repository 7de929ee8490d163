import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from './load/target.js';
import { withoutRoleTimeouts } from './support/coupon-run.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { runPeriodRace, startRaceServers } from './support/period-race.js';

// Members racing the instant a campaign opens and the instant another ends, on two server
// processes of one database at a time, every way an issue runs: the one statement, the batched
// one statement (COUPON_ISSUE_BATCH_MAX), and the transaction (sessions without the role's
// timeouts); one budget row, 16 and 64 slots, leases. The database's clock decides for all of
// them: no coupon before startsAt or from endsAt on by its clock, no NOT_STARTED to a request sent
// after the opening, and the campaign that opened sells out exactly.
// test/coupons.period.naive.slow.test.ts runs the same against processes that read their own clocks.

describe('the instants a campaign opens and ends, raced on two server processes', () => {
  let backend: TestBackend;
  let servers: Record<'oneStatement' | 'batched' | 'transaction', ServerProcess>;
  beforeAll(async () => {
    backend = await createTestBackend();
    const [oneStatement, batched, transaction] = await startRaceServers(backend.databaseUrl, [
      { BENCH_STRATEGY: 'conditional' },
      { BENCH_STRATEGY: 'conditional', COUPON_ISSUE_BATCH_MAX: '32' },
      { BENCH_STRATEGY: 'conditional', DATABASE_URL: withoutRoleTimeouts(backend.databaseUrl) },
    ]);
    servers = { oneStatement: oneStatement!, batched: batched!, transaction: transaction! };
  });
  afterAll(async () => {
    for (const server of Object.values(servers ?? {})) await server.stop();
    await backend.close();
  });

  const runs = [
    { name: 'one budget row, one statement and transaction', pair: ['oneStatement', 'transaction'], budgetSlots: 1, budgetLeaseCoupons: 0 },
    { name: '16 slots, batched and one statement', pair: ['batched', 'oneStatement'], budgetSlots: 16, budgetLeaseCoupons: 0 },
    { name: '64 slots, batched and transaction', pair: ['batched', 'transaction'], budgetSlots: 64, budgetLeaseCoupons: 0 },
    { name: 'leases, transaction and batched', pair: ['transaction', 'batched'], budgetSlots: 1, budgetLeaseCoupons: 8 },
  ] as const;
  for (const run of runs) {
    it(`${run.name}: the database's clock decides, whichever process answers`, async ({ annotate }) => {
      const result = await runPeriodRace(
        run.pair.map((name) => servers[name]),
        backend.sql,
        `period-${run.budgetSlots}-${run.budgetLeaseCoupons}-${run.pair.join('-')}`,
        { budgetSlots: run.budgetSlots, budgetLeaseCoupons: run.budgetLeaseCoupons },
      );
      await annotate(`${run.name}: opening ${JSON.stringify(result.opening)}, closing ${JSON.stringify(result.closing)}`);
      expect(result.violations).toEqual([]);
      // The race straddled both instants: refusals on each side of them, coupons between.
      expect(result.opening['NOT_STARTED']).toBeGreaterThan(0);
      expect(result.closing['ENDED']).toBeGreaterThan(0);
      expect(result.closing['ISSUED']).toBeGreaterThan(0);
    });
  }
});
