import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateCampaignDocument, IssueCouponDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, gql, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'leases';

describe('budget leases (budgetLeaseCoupons)', () => {
  let backend: TestBackend;
  const rows = async () => ({
    budgetRow: (
      await backend.sql.query<{ issued_yen: number; leased_yen: number }>(
        "select issued_yen, leased_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'leased'",
        [TENANT],
      )
    ).rows[0]!,
    leases: (
      await backend.sql.query<{ holder: string; budget_yen: number; issued_yen: number }>(
        "select holder, budget_yen, issued_yen from campaign_budget_leases where tenant_id = $1 and campaign_id = 'leased'",
        [TENANT],
      )
    ).rows,
  });
  const issue = (member: string) =>
    gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'leased' } }, asUser(TENANT, member));

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 1_000_000);
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'leased', name: 'Leased', discountYen: 100, budgetYen: 10_000, budgetLeaseCoupons: 20 } },
      asTenantAdmin(TENANT),
    );
  });
  afterAll(() => backend.close());

  it('takes a lease after the first issue, issues from it, counts it in issuedYen, and gives it back when the process stops', async () => {
    expect((await issue('m0')).issueCoupon.status).toBe('ISSUED');
    // The first issue had no lease and took from the budget row; the lease is taken after it, in the background.
    for (let tries = 0; (await rows()).leases.length === 0; tries++) {
      if (tries > 400) throw new Error('no lease was taken');
      await sleep(25);
    }
    expect(await rows()).toEqual({
      budgetRow: { issued_yen: 100, leased_yen: 2_000 },
      leases: [{ holder: backend.services.budgetLeases.holder, budget_yen: 2_000, issued_yen: 0 }],
    });
    for (const member of ['m1', 'm2', 'm3']) expect((await issue(member)).issueCoupon.status).toBe('ISSUED');
    expect((await rows()).leases[0]!.issued_yen).toBe(300);
    const campaign = await gql<{ campaign: { budgetLeaseCoupons: number; issuedYen: number; remainingYen: number } }, { id: string }>(
      backend.app.fetch,
      'query ($id: ID!) { campaign(id: $id) { budgetLeaseCoupons issuedYen remainingYen } }',
      { id: 'leased' },
      asTenantAdmin(TENANT),
    );
    expect(campaign.body.data?.campaign).toEqual({ budgetLeaseCoupons: 20, issuedYen: 400, remainingYen: 9_600 });

    await backend.services.budgetLeases.stop();
    expect(await rows()).toEqual({ budgetRow: { issued_yen: 400, leased_yen: 0 }, leases: [] });
  });
});
