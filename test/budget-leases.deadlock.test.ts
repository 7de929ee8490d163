import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IssueCouponDocument } from './generated/graphql.js';
import { asUser, createTestBackend, gqlOk, TEST_APP, type TestBackend } from './support/harness.js';
import { createLeasedCampaign } from './support/lease-run.js';
import { waitFor, waitForLockWaiter } from './support/wait.js';

// The interleaving in which an issue and a refill of one campaign would wait for each other, if an
// issue could hold a lease row while it waits for the budget row that a refill locks first: the
// issue's snapshot sees room in this process's lease; the lease fills up before the issue locks it;
// the refill meanwhile holds the budget row and waits for an expired lease another session holds.
// Each step is made to happen by holding rows in sessions of the test's own. Here every statement
// locks lease rows before the budget row and an issue holds none while it waits, so both finish.

const TENANT = 'deadlock';

describe('budget leases: an issue and a refill of one campaign never wait for each other', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
    await createLeasedCampaign(backend, TENANT, 'both', 10_000, 5);
  });
  afterAll(() => backend.close());

  /** Sessions of the app's pool in this file's database that wait for a lock. */
  const lockWaiters = async () =>
    (
      await backend.sql.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where application_name = $1 and datname = current_database() and wait_event_type = 'Lock'",
        [TEST_APP],
      )
    ).rows[0]!.n;
  const settled = (promise: Promise<unknown>) => {
    const state = { done: false };
    void promise.finally(() => (state.done = true)).catch(() => {});
    return state;
  };
  const session = async () => {
    const client = await backend.sql.connect();
    await client.query('begin');
    return client;
  };
  const deadlockRetries = async () =>
    (await backend.services.metrics.transactionRetries.get()).values
      .filter((v) => v.labels['sqlstate'] === '40P01')
      .reduce((sum, v) => sum + v.value, 0);

  it('a refill waiting for an expired lease while an issue wants the lease it fills: both finish, neither is a deadlock victim', async () => {
    const holder = backend.services.budgetLeases.holder;
    // This process's lease with one coupon left, and an expired one of a process that died.
    await backend.sql.query(
      `with leases as (
         insert into campaign_budget_leases (tenant_id, campaign_id, holder, budget_yen, issued_yen, expires_at)
         values ($1, 'both', $2, 500, 400, now() + interval '1 hour'), ($1, 'both', 'dead', 100, 0, now() - interval '1 second')
       )
       update campaign_budget_slots set leased_yen = 600 where tenant_id = $1 and campaign_id = 'both'`,
      [TENANT, holder],
    );
    const held: pg.PoolClient[] = [];
    try {
      // The issue takes its snapshot, then waits for the member's coupon entry, which a session holds.
      const entry = await session();
      held.push(entry);
      await entry.query(
        "insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at) values ($1, 'both', 'ann', '2026-01', 100, now())",
        [TENANT],
      );
      const issue = gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'both' } }, asUser(TENANT, 'ann'));
      const issued = settled(issue);
      await waitForLockWaiter(backend);
      // Meanwhile the lease it saw with room fills up, and a session holds the expired lease.
      await backend.sql.query('update campaign_budget_leases set issued_yen = budget_yen where tenant_id = $1 and holder = $2', [
        TENANT,
        holder,
      ]);
      const expired = await session();
      held.push(expired);
      await expired.query("select 1 from campaign_budget_leases where tenant_id = $1 and holder = 'dead' for update", [TENANT]);
      // The refill: with the budget row locked first it would now wait for the expired lease.
      const refill = backend.services.budgetLeases.refill({ tenantId: TENANT, campaignId: 'both', leaseCoupons: 5 });
      const refilled = settled(refill);
      await waitFor(async () => (refilled.done || (await lockWaiters()) >= 2 ? true : undefined), 'the refill to finish or wait');
      // The issue goes on: it locks the lease it saw with room, then (were it to hold it) would wait for the budget row.
      await entry.query('rollback');
      await waitFor(async () => (issued.done || (await lockWaiters()) >= 2 ? true : undefined), 'the issue to finish or wait');
      await expired.query('rollback');

      expect((await issue).issueCoupon.status).toBe('ISSUED');
      expect(await refill).toBe(500);
      expect(await deadlockRetries()).toBe(0);
      const rows = await backend.sql.query(
        `select (select leased_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'both') as leased,
                (select coalesce(sum(budget_yen), 0)::int from campaign_budget_leases where tenant_id = $1 and campaign_id = 'both') as leases`,
        [TENANT],
      );
      expect(rows.rows[0].leased).toBe(rows.rows[0].leases);
    } finally {
      for (const client of held) client.release();
    }
  });
});
