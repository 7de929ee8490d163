import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownLeaseOnly } from './naive/budget-leases.js';
import { CampaignDocument } from './generated/graphql.js';
import { asTenantAdmin, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { createLeasedCampaign } from './support/lease-run.js';
import { waitFor } from './support/wait.js';
import { startWorkers, type Workers } from '../src/entry/worker/index.js';
import type { StandIns } from '../src/services/services.js';

// The background loop gives expired budget leases back to the budget row while nobody issues on
// their campaign: a killed process's lease (planted here as it leaves it: yen leased out, some of
// it issued, never renewed) is back within a TTL of expiring.

const TTL_MS = 3_000;

async function withLoops(standIns: StandIns) {
  const backend = await createTestBackend({ env: { BUDGET_LEASE_TTL_MS: String(TTL_MS) }, standIns });
  const workers = startWorkers(backend.services);
  return { backend, workers };
}

/** A leased campaign and the lease a killed process left in it: 2,000 yen, 700 of them issued, expiring in 300 ms. */
async function killedProcessLease(backend: TestBackend, tenantId: string) {
  await createLeasedCampaign(backend, tenantId, 'idle', 10_000, 20);
  const { rows } = await backend.sql.query<{ expires_at: Date }>(
    `with lease as (
       insert into campaign_budget_leases (tenant_id, campaign_id, holder, budget_yen, issued_yen, expires_at)
       values ($1, 'idle', 'killed-host:4242:0badf00d', 2000, 700, clock_timestamp() + interval '300 milliseconds')
       returning expires_at
     ), budget_row as (
       update campaign_budget_slots set leased_yen = leased_yen + 2000 where tenant_id = $1 and campaign_id = 'idle'
     )
     select expires_at from lease`,
    [tenantId],
  );
  return rows[0]!.expires_at;
}

const standing = async (backend: TestBackend, tenantId: string) => ({
  budgetRow: (
    await backend.sql.query(
      "select budget_yen, issued_yen, leased_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'idle'",
      [tenantId],
    )
  ).rows[0],
  leases: (await backend.sql.query("select holder from campaign_budget_leases where tenant_id = $1 and campaign_id = 'idle'", [tenantId]))
    .rows,
  campaign: (await gqlOk(backend.app.fetch, CampaignDocument, { id: 'idle' }, asTenantAdmin(tenantId))).campaign,
});

/** Resolves with how long after its expiry the lease was gone, once it is. */
const givenBack = (backend: TestBackend, tenantId: string, expiresAt: Date, ms: number) =>
  waitFor(
    async () => {
      const { rows } = await backend.sql.query<{ lag_ms: number; present: boolean }>(
        `select extract(epoch from clock_timestamp() - $2::timestamptz) * 1000 as lag_ms,
                exists (select 1 from campaign_budget_leases where tenant_id = $1 and campaign_id = 'idle') as present`,
        [tenantId, expiresAt],
      );
      return rows[0]!.present ? undefined : Number(rows[0]!.lag_ms);
    },
    "give-back of the killed process's lease",
    ms,
  );

describe('the budget lease expiry loop', () => {
  let backend: TestBackend;
  let workers: Workers;
  beforeAll(async () => {
    ({ backend, workers } = await withLoops({}));
  });
  afterAll(async () => {
    await workers.stop();
    await backend.close();
  });

  it("gives a killed process's expired lease back within a TTL, with nobody issuing on the campaign", async ({ annotate }) => {
    const expiresAt = await killedProcessLease(backend, 'expiry');
    const before = await standing(backend, 'expiry');
    expect(before.budgetRow).toEqual({ budget_yen: 10_000, issued_yen: 0, leased_yen: 2_000 });
    expect(before.campaign).toMatchObject({ issuedYen: 700, remainingYen: 9_300 });

    const lagMs = await givenBack(backend, 'expiry', expiresAt, 10 * TTL_MS);
    await annotate(`lease given back ${lagMs.toFixed(0)} ms after it expired (TTL ${TTL_MS} ms, a pass every ${TTL_MS / 3} ms)`);
    expect(lagMs).toBeLessThan(TTL_MS);
    // Its issued yen is the budget row's now, the rest back in the row's room; nothing was issued meanwhile.
    expect(await standing(backend, 'expiry')).toEqual({
      budgetRow: { budget_yen: 10_000, issued_yen: 700, leased_yen: 0 },
      leases: [],
      campaign: expect.objectContaining({ issuedYen: 700, remainingYen: 9_300 }),
    });
    const coupons = await backend.sql.query("select count(*)::int as n from coupons where tenant_id = 'expiry'");
    expect(coupons.rows[0].n).toBe(0);
  });
});

describe('the budget lease expiry loop, naive: leases nobody gives back (test/naive/budget-leases.ts)', () => {
  it('keeps the expired lease out of the budget row', async () => {
    const { backend, workers } = await withLoops({ budgetLeasing: ownLeaseOnly });
    try {
      const expiresAt = await killedProcessLease(backend, 'expiry-naive');
      await expect(givenBack(backend, 'expiry-naive', expiresAt, 2 * TTL_MS)).rejects.toThrow(/give-back/);
      expect((await standing(backend, 'expiry-naive')).budgetRow).toEqual({ budget_yen: 10_000, issued_yen: 0, leased_yen: 2_000 });
    } finally {
      await workers.stop();
      await backend.close();
    }
  });
});
