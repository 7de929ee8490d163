import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monthOf } from '../src/features/coupons/period.js';
import {
  CampaignDocument,
  CreateCampaignDocument,
  IssueCouponDocument,
  LedgerCheckDocument,
  MyCouponsDocument,
} from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'shop';

describe('issueCoupon, one request at a time', () => {
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  const rows = async (table: string) =>
    (await backend.sql.query<{ n: number }>(`select count(*)::int as n from ${table} where tenant_id = $1`, [TENANT])).rows[0]!.n;
  const issue = async (campaignId: string, member = 'alice') =>
    (await gqlOk(fetch, IssueCouponDocument, { input: { campaignId } }, asUser(TENANT, member))).issueCoupon;
  const campaign = async (id: string, discountYen: number, budgetYen: number) =>
    gqlOk(fetch, CreateCampaignDocument, { input: { id, name: id, discountYen, budgetYen } }, asTenantAdmin(TENANT));

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 2_000);
    await campaign('spring', 1_000, 100_000);
    await campaign('summer', 1_000, 100_000);
    await campaign('autumn', 1_000, 100_000);
    await campaign('tiny', 500, 500);
  });
  afterAll(() => backend.close());

  it('issues, then answers ALREADY_ISSUED with the same coupon, then stops at the monthly cap', async () => {
    const spring = async () => (await gqlOk(fetch, CampaignDocument, { id: 'spring' }, asUser(TENANT, 'alice'))).campaign!;
    const springBefore = await spring();
    const first = await issue('spring');
    expect(first.status).toBe('ISSUED');
    expect(first.coupon).toMatchObject({
      campaignId: 'spring',
      memberId: 'alice',
      month: expect.stringMatching(/^\d{4}-\d{2}$/),
      amountYen: 1_000,
    });

    const again = await issue('spring');
    expect(again).toEqual({ status: 'ALREADY_ISSUED', coupon: first.coupon });

    expect((await issue('summer')).status).toBe('ISSUED');
    const before = { coupons: await rows('coupons'), usage: await rows('member_monthly_usage'), outbox: await rows('outbox_events') };
    expect(await issue('autumn')).toEqual({ status: 'MONTHLY_CAP', coupon: null });
    expect({ coupons: await rows('coupons'), usage: await rows('member_monthly_usage'), outbox: await rows('outbox_events') }).toEqual(
      before,
    );

    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'alice'));
    expect(mine.myCoupons.map((c) => c.campaignId).sort()).toEqual(['spring', 'summer']);
    expect(await spring()).toMatchObject({ issuedYen: springBefore.issuedYen + 1_000, remainingYen: springBefore.remainingYen - 1_000 });
  });

  it('refuses when the budget is spent and leaves nothing behind', async () => {
    expect((await issue('tiny', 'bob')).status).toBe('ISSUED');
    const before = { coupons: await rows('coupons'), usage: await rows('member_monthly_usage'), outbox: await rows('outbox_events') };
    expect(await issue('tiny', 'carol')).toEqual({ status: 'BUDGET_EXCEEDED', coupon: null });
    expect({ coupons: await rows('coupons'), usage: await rows('member_monthly_usage'), outbox: await rows('outbox_events') }).toEqual(
      before,
    );
    const carolUsage = await backend.sql.query("select 1 from member_monthly_usage where tenant_id = $1 and member_id = 'carol'", [TENANT]);
    expect(carolUsage.rowCount).toBe(0);
  });

  it("counts an issue in its issuedAt's month in the business time zone: 2026-09-30T15:00:00Z is 2026-10 in Asia/Tokyo", async () => {
    const monthIn = async (instant: string, zone: string) =>
      (await sql<{ month: string }>`select ${monthOf(sql`${instant}::timestamptz`, zone)} as month`.execute(backend.services.pool)).rows[0]!
        .month;
    expect(await monthIn('2026-09-30T15:00:00Z', 'Asia/Tokyo')).toBe('2026-10');
    expect(await monthIn('2026-09-30T14:59:59.999Z', 'Asia/Tokyo')).toBe('2026-09');
    expect(await monthIn('2026-09-30T18:29:59.999Z', 'Asia/Kolkata')).toBe('2026-09');
    expect(await monthIn('2026-09-30T18:30:00.000Z', 'Asia/Kolkata')).toBe('2026-10');
    expect(await monthIn('2026-09-30T18:30:00.000Z', 'America/New_York')).toBe('2026-09');
    // The issue's month is its issuedAt's, both the database's instant: never the server's clock.
    const issued = (await issue('spring', 'dave')).coupon!;
    expect(issued.month).toBe(await monthIn(issued.issuedAt, 'Asia/Tokyo'));
    const usage = await backend.sql.query("select month from member_monthly_usage where tenant_id = $1 and member_id = 'dave'", [TENANT]);
    expect(usage.rows).toEqual([{ month: issued.month }]);
  });

  it('counts the cap per month: a month spent to the cap leaves the next one fresh', async () => {
    const { month, previous } = (
      await backend.sql.query<{ month: string; previous: string }>(
        `select to_char(now() at time zone 'Asia/Tokyo', 'YYYY-MM') as month,
                to_char(now() at time zone 'Asia/Tokyo' - interval '1 month', 'YYYY-MM') as previous`,
      )
    ).rows[0]!;
    await backend.sql.query("insert into member_monthly_usage (tenant_id, member_id, month, used_yen) values ($1, 'erin', $2, 2000)", [
      TENANT,
      previous,
    ]);
    expect((await issue('autumn', 'erin')).coupon?.month).toBe(month);
  });

  it('answers NOT_FOUND for a campaign of another tenant, and refuses a session without a member', async () => {
    await createTenant(backend, 'elsewhere');
    const other = await gql(fetch, IssueCouponDocument, { input: { campaignId: 'spring' } }, asUser('elsewhere', 'alice'));
    expect(errorCodes(other)).toEqual(['NOT_FOUND']);
    const noMember = await gql(fetch, IssueCouponDocument, { input: { campaignId: 'spring' } }, asTenantAdmin(TENANT));
    expect(errorCodes(noMember)).toEqual(['FORBIDDEN']);
  });

  it('validates campaigns before the database does, and lets only the tenant admin create them', async () => {
    const create = (input: Record<string, unknown>, headers = asTenantAdmin(TENANT)) =>
      gql(fetch, CreateCampaignDocument, { input: { id: 'x', name: 'x', discountYen: 100, budgetYen: 1000, ...input } as never }, headers);
    for (const input of [
      { discountYen: 0 },
      { discountYen: -5 },
      { budgetYen: 0 },
      { discountYen: 2000 },
      { id: 'has space' },
      { name: '' },
      { budgetSlots: 0 },
      { budgetSlots: 65 },
      { budgetSlots: 20 },
      { budgetLeaseCoupons: -1 },
      { budgetLeaseCoupons: 10_001 },
      { budgetLeaseCoupons: 10, budgetSlots: 2 },
    ]) {
      expect(errorCodes(await create(input)), JSON.stringify(input)).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await create({}, asUser(TENANT)))).toEqual(['FORBIDDEN']);
    expect(errorCodes(await create({ id: 'spring' }))).toEqual(['BAD_USER_INPUT']);
    expect(await rows('campaigns')).toBe(4);
  });

  it('keeps CHECK constraints behind the input checks', async () => {
    await expect(
      backend.sql.query("update campaign_budget_slots set issued_yen = budget_yen + 1 where tenant_id = $1 and campaign_id = 'spring'", [
        TENANT,
      ]),
    ).rejects.toThrow(/campaign_budget_slots(_leased)?_within_budget/);
    await expect(
      backend.sql.query("insert into campaigns (tenant_id, id, name, discount_yen, budget_yen) values ($1, 'neg', 'n', -1, 10)", [TENANT]),
    ).rejects.toThrow(/check constraint/);
  });

  it('ledgerCheck is clean after real issues and finds drift planted with SQL', async () => {
    // A tenant of its own, so that the other tests' issues (in any order) do not matter.
    const tenant = 'ledger';
    await createTenant(backend, tenant, 2_000);
    for (const id of ['spring', 'summer', 'autumn']) {
      await gqlOk(
        fetch,
        CreateCampaignDocument,
        { input: { id, name: id, discountYen: 1_000, budgetYen: 100_000 } },
        asTenantAdmin(tenant),
      );
    }
    for (const id of ['summer', 'autumn']) {
      expect((await gqlOk(fetch, IssueCouponDocument, { input: { campaignId: id } }, asUser(tenant, 'alice'))).issueCoupon.status).toBe(
        'ISSUED',
      );
    }
    const ledger = async () => (await gqlOk(fetch, LedgerCheckDocument, {}, asTenantAdmin(tenant))).ledgerCheck;
    expect(await ledger()).toMatchObject({ ok: true, campaignDrift: [], usageDrift: [], membersOverCap: [], campaignsOverBudget: [] });

    await backend.sql.query(
      "update campaign_budget_slots set issued_yen = issued_yen + 1000 where tenant_id = $1 and campaign_id = 'summer'",
      [tenant],
    );
    await backend.sql.query("update member_monthly_usage set used_yen = used_yen - 1000 where tenant_id = $1 and member_id = 'alice'", [
      tenant,
    ]);
    const { month } = (await backend.sql.query<{ month: string }>('select month from coupons where tenant_id = $1 limit 1', [tenant]))
      .rows[0]!;
    await backend.sql.query(
      "insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at) values ($1, 'spring', 'alice', $2, 1000, now())",
      [tenant, month],
    );
    const report = await ledger();
    expect(report.ok).toBe(false);
    expect(report.campaignDrift.map((d) => d.campaignId).sort()).toEqual(['spring', 'summer']);
    expect(report.usageDrift).toEqual([{ tenantId: tenant, memberId: 'alice', month, usedYen: 1000, couponsYen: 3000 }]);
    expect(report.membersOverCap).toEqual([{ tenantId: tenant, memberId: 'alice', month, couponsYen: 3000, capYen: 2000 }]);
    expect(errorCodes(await gql(fetch, LedgerCheckDocument, {}, asUser(tenant)))).toEqual(['FORBIDDEN']);
  });
});
