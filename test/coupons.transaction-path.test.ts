import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IssueCouponDocument } from './generated/graphql.js';
import { referenceScenario, type CouponScenario } from './load/scenarios/coupons.js';
import { asUser, createTestBackend, createTestDatabaseUrl, gqlOk, type TestBackend } from './support/harness.js';
import { createLeasedCampaign } from './support/lease-run.js';
import { waitFor } from './support/wait.js';
import { REFERENCE_SCENARIO_TIMEOUT_MS, runSpread, withoutRoleTimeouts, type SpreadRunResult } from './support/coupon-run.js';

// The reference scenario (300 members x 3 campaigns x 2 sends, released together) with issues on
// the transaction path: a backend whose sessions lack the role's timeouts, as behind a pooler whose
// server connections predate them, so every issue runs as the transaction. Each member's two sends
// of a campaign go out one after the other (double taps in flight together). Every BUDGET_EXCEEDED
// is checked as it comes: the campaign must have less than one coupon left.

const CONCURRENCY = 32;

function scenarioWith(runId: string, campaign: Partial<CouponScenario['campaigns'][number]>): CouponScenario {
  const scenario = referenceScenario(runId);
  scenario.tapsTogether = true;
  for (const spec of scenario.campaigns) Object.assign(spec, campaign);
  return scenario;
}

function expectExact(result: SpreadRunResult) {
  expect(result.invariants.violations).toEqual([]);
  expect(result.outcomes['ISSUED']).toBe(600);
  expect(result.outcomes['TRY_AGAIN']).toBeUndefined();
  expect(Object.keys(result.outcomes).sort()).toEqual(['ALREADY_ISSUED', 'BUDGET_EXCEEDED', 'ISSUED', 'MONTHLY_CAP']);
}

const describeResult = (label: string, result: SpreadRunResult) =>
  `${label}: ${result.requests} requests, outcomes ${JSON.stringify(result.outcomes)}, reruns ${JSON.stringify(result.retries)}, TRY_AGAIN resent ${JSON.stringify(result.resent)}; ` +
  result.invariants.checks.map((c) => `${c.invariant}: ${c.counted}`).join('; ');

describe('issueCoupon on the transaction path: the reference scenario, double taps together', () => {
  let databaseUrl: string;
  let onTransactions: TestBackend;
  let onOneStatement: TestBackend;
  beforeAll(async () => {
    databaseUrl = await createTestDatabaseUrl();
    onTransactions = await createTestBackend({ databaseUrl: withoutRoleTimeouts(databaseUrl) });
    onOneStatement = await createTestBackend({ databaseUrl });
  });
  afterAll(async () => {
    await onTransactions.close();
    await onOneStatement.close();
  });

  /** A campaign of 10 coupons whose whole budget another process holds in a lease (live, or expired). */
  const leasedElsewhere = async (tenantId: string, expired: boolean) => {
    await createLeasedCampaign(onTransactions, tenantId, 'held', 1_000, 5);
    await onTransactions.sql.query(
      `with lease as (
         insert into campaign_budget_leases (tenant_id, campaign_id, holder, budget_yen, issued_yen, expires_at)
         values ($1, 'held', 'elsewhere', 1000, 300, now() + $2::interval)
       )
       update campaign_budget_slots set leased_yen = 1000 where tenant_id = $1 and campaign_id = 'held'`,
      [tenantId, expired ? '-1 second' : '1 hour'],
    );
  };
  /** The budget row and the other process's lease, read in one snapshot. */
  const rowsOf = async (tenantId: string) =>
    (
      await onTransactions.sql.query<{ budgetRow: { issued_yen: number; leased_yen: number }; elsewhere: unknown[] }>(
        `select (select json_build_object('issued_yen', issued_yen, 'leased_yen', leased_yen) from campaign_budget_slots
                  where tenant_id = $1 and campaign_id = 'held') as "budgetRow",
                coalesce((select json_agg(json_build_object('budget_yen', budget_yen, 'issued_yen', issued_yen)) from campaign_budget_leases
                  where tenant_id = $1 and campaign_id = 'held' and holder = 'elsewhere'), '[]') as elsewhere`,
        [tenantId],
      )
    ).rows[0]!;
  const issueHeld = async (tenantId: string, member: string) =>
    (await gqlOk(onTransactions.app.fetch, IssueCouponDocument, { input: { campaignId: 'held' } }, asUser(tenantId, member))).issueCoupon
      .status;

  it("issues from another process's lease when the budget row has none left", async () => {
    await leasedElsewhere('tx-lease', false);
    expect(await issueHeld('tx-lease', 'a')).toBe('ISSUED');
    expect((await rowsOf('tx-lease')).elsewhere).toEqual([{ budget_yen: 1_000, issued_yen: 400 }]);
  });

  it('gives back an expired lease after it issues, as the one statement does', async () => {
    await leasedElsewhere('tx-expired', true);
    expect(await issueHeld('tx-expired', 'a')).toBe('ISSUED');
    // The refill after the issue gives the expired lease back (its issued yen into the budget row's) and leases this process some.
    const after = await waitFor(async () => {
      const rows = await rowsOf('tx-expired');
      return rows.elsewhere.length === 0 ? rows : undefined;
    }, 'the expired lease given back');
    // 400 issued from the lease; of the 600 left, half (3 coupons) leased to this process.
    expect(after.budgetRow).toEqual({ issued_yen: 400, leased_yen: 300 });
  });

  it('its sessions lack the timeouts the one statement needs', async () => {
    const settings = await sql<{ lock: string; statement: string }>`
      select current_setting('lock_timeout') as lock, current_setting('statement_timeout') as statement`.execute(
      onTransactions.database.db,
    );
    expect(settings.rows).toEqual([{ lock: '0', statement: '0' }]);
  });

  it(
    '16 budget slots: every coupon the budgets pay for, refused only when sold out',
    async ({ annotate }) => {
      // 100,000 yen over 16 slots pays for 100 coupons: 4 slots of 7 and 12 of 6, not 16 of 6.
      const result = await runSpread([onTransactions], scenarioWith('tx-slots', { budgetSlots: 16 }), CONCURRENCY);
      await annotate(describeResult('transaction path, 16 slots', result));
      expectExact(result);
    },
    REFERENCE_SCENARIO_TIMEOUT_MS,
  );

  it(
    'budget leases: the transaction path takes from the leases the other process holds, and leases of its own',
    async ({ annotate }) => {
      // Members' campaigns alternate between a backend on the one statement and one on the transaction path (a double tap
      // goes to one of them), both leasing.
      const leases = onTransactions.services.budgetLeases;
      const refill = leases.refill.bind(leases);
      let grantedOnTransactions = 0;
      leases.refill = async (campaign) => {
        const granted = await refill(campaign);
        grantedOnTransactions += granted;
        return granted;
      };
      try {
        const result = await runSpread(
          [onOneStatement, onTransactions],
          scenarioWith('tx-leases', { budgetLeaseCoupons: 10 }),
          CONCURRENCY,
        );
        await annotate(
          `${describeResult('transaction path beside the one statement, leases of 10', result)}; leased on the transaction path ${grantedOnTransactions} yen`,
        );
        expectExact(result);
        expect(grantedOnTransactions).toBeGreaterThan(0);
      } finally {
        leases.refill = refill;
      }
    },
    REFERENCE_SCENARIO_TIMEOUT_MS,
  );
});
