import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CampaignDocument, CreateCampaignDocument, IssueCouponDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'slots';

describe('budget slots', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(() => backend.close());

  it('splits the budget over its slots by whole coupons, never exceeds it, and sells out exactly', async () => {
    // 4,000 yen pays for thirteen 300-yen coupons: four in slot 0 (with the 100 yen no coupon can use), three in each other slot.
    const created = await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'sliced', name: 'Sliced', discountYen: 300, budgetYen: 4_000, budgetSlots: 4 } },
      asTenantAdmin(TENANT),
    );
    expect(created.createCampaign.campaign).toMatchObject({ budgetSlots: 4, issuedYen: 0, remainingYen: 4_000 });
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'sliced' } }, asUser(TENANT, `m${i}`)),
      ),
    );
    const statuses = answers.map((a) => a.issueCoupon.status);
    expect(statuses.filter((s) => s === 'ISSUED')).toHaveLength(13);
    expect(statuses.filter((s) => s === 'BUDGET_EXCEEDED')).toHaveLength(27);
    const slots = await backend.sql.query<{ slot: number; budget_yen: number; issued_yen: number }>(
      "select slot, budget_yen, issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'sliced' order by slot",
      [TENANT],
    );
    expect(slots.rows).toEqual([
      { slot: 0, budget_yen: 1_300, issued_yen: 1_200 },
      ...[1, 2, 3].map((slot) => ({ slot, budget_yen: 900, issued_yen: 900 })),
    ]);
    const campaign = await gqlOk(backend.app.fetch, CampaignDocument, { id: 'sliced' }, asTenantAdmin(TENANT));
    // What stays unissued is less than one coupon: floor(budgetYen / discountYen) x discountYen was issued.
    expect(campaign.campaign).toMatchObject({ issuedYen: 3_900, remainingYen: 100 });
  });

  it('refuses more slots than the budget can fill with one discount each', async () => {
    const response = await gql(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'thin', name: 'Thin', discountYen: 500, budgetYen: 1_000, budgetSlots: 3 } },
      asTenantAdmin(TENANT),
    );
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('GET /metrics', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { LOCK_TIMEOUT_MS: '50', TRANSACTION_MAX_ATTEMPTS: '3' } });
    await createTenant(backend, 'metered');
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'm', name: 'M', discountYen: 100, budgetYen: 10_000 } },
      asTenantAdmin('metered'),
    );
  });
  afterAll(() => backend.close());

  const scrape = async () => {
    const response = await backend.app.fetch(new Request('http://test.local/metrics'));
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    return response.text();
  };

  it('counts requests, coupon outcomes, retries by SQLSTATE, pool connections and the outbox', async () => {
    await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'm' } }, asUser('metered', 'a'));
    await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'm' } }, asUser('metered', 'a'));

    // Hold the budget row so the next issue meets lock timeouts (55P03) until its attempts run out.
    const holder = await backend.sql.connect();
    await holder.query('begin');
    await holder.query("select * from campaign_budget_slots where tenant_id = 'metered' for update");
    const blocked = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'm' } }, asUser('metered', 'b'));
    await holder.query('rollback');
    holder.release();
    expect(errorCodes(blocked)).toEqual(['TRY_AGAIN']);

    const text = await scrape();
    expect(text).toMatch(/coupon_issue_outcomes_total\{status="ISSUED"\} 1/);
    expect(text).toMatch(/coupon_issue_outcomes_total\{status="ALREADY_ISSUED"\} 1/);
    expect(text).toMatch(/transaction_retries_total\{sqlstate="55P03"\} 2/);
    expect(text).toMatch(/graphql_request_duration_seconds_count\{operation="issueCoupon",outcome="ISSUED"\} 1/);
    expect(text).toMatch(/graphql_request_duration_seconds_count\{operation="issueCoupon",outcome="TRY_AGAIN"\} 1/);
    expect(text).toMatch(new RegExp(`db_pool_connections\\{state="in_use",pid="${process.pid}"\\} \\d+`));
    expect(text).toMatch(new RegExp(`db_pool_connections\\{state="waiting",pid="${process.pid}"\\} 0`));
    expect(text).toMatch(/outbox_pending_events 1/);
    expect(text).toMatch(/outbox_oldest_pending_age_seconds \d/);
  });
});
