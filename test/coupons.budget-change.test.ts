import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAMPAIGN_BUDGET_CHANGED_TOPIC } from '../src/features/coupons/budget-change.js';
import {
  ChangeCampaignBudgetDocument,
  CreateCampaignDocument,
  IssueCouponDocument,
  type CreateCampaignInput,
} from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  callAction,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  type TestBackend,
} from './support/harness.js';

// changeCampaignBudget one request at a time: what each answer wrote (the campaign, its slots and
// leases, one audit row and one campaign.budget_changed event per change), counted with SQL.
// test/coupons.budget-change.concurrency.test.ts changes budgets while members issue.

const TENANT = 'budgets';

describe('changeCampaignBudget, one request at a time', () => {
  let backend: TestBackend;
  const admin = asTenantAdmin(TENANT);
  const create = (input: Partial<CreateCampaignInput> & { id: string }) =>
    gql(backend.app.fetch, CreateCampaignDocument, { input: { name: input.id, discountYen: 100, budgetYen: 10_000, ...input } }, admin);
  const change = (campaignId: string, budgetYen: number, headers: Record<string, string> = admin) =>
    gql(backend.app.fetch, ChangeCampaignBudgetDocument, { input: { campaignId, budgetYen } }, headers);
  const issue = async (campaignId: string, members: string[]) => {
    for (const member of members) {
      const answer = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId } }, asUser(TENANT, member));
      expect(answer.body.data!.issueCoupon.status).toBe('ISSUED');
    }
  };
  /** The campaign's rows as SQL reads them, and the audit rows and events of its changes. */
  const standing = async (campaignId: string) =>
    (
      await backend.sql.query(
        `select c.budget_yen,
                (select array_agg(array[s.budget_yen, s.issued_yen, s.leased_yen] order by s.slot)
                   from campaign_budget_slots s where s.tenant_id = c.tenant_id and s.campaign_id = c.id) as slots,
                (select count(*)::int from campaign_budget_leases l where l.tenant_id = c.tenant_id and l.campaign_id = c.id) as leases,
                (select count(*)::int from coupons k where k.tenant_id = c.tenant_id and k.campaign_id = c.id) as coupons,
                (select count(*)::int from audit_log a where a.tenant_id = c.tenant_id and a.operation = 'changeCampaignBudget'
                    and c.id = any(a.entity_ids)) as audit_rows,
                (select coalesce(jsonb_agg(e.payload - 'changedAt' order by e.created_at, e.payload->>'budgetYen'), '[]')
                   from outbox_events e where e.tenant_id = c.tenant_id and e.topic = $3 and e.payload->>'campaignId' = c.id) as events
           from campaigns c where c.tenant_id = $1 and c.id = $2`,
        [TENANT, campaignId, CAMPAIGN_BUDGET_CHANGED_TOPIC],
      )
    ).rows[0];

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 1_000_000);
    await createTenant(backend, 'elsewhere', 1_000_000);
  });
  afterAll(() => backend.close());

  it('raises and lowers a budget: CHANGED, the campaign and its slot add up, one audit row and one event per change', async () => {
    await create({ id: 'plain' });
    await issue('plain', ['a1', 'a2', 'a3']);
    const raised = (await change('plain', 25_050)).body.data!.changeCampaignBudget;
    expect(raised).toMatchObject({ status: 'CHANGED', campaign: { id: 'plain', budgetYen: 25_050, issuedYen: 300, remainingYen: 24_750 } });
    const lowered = (await change('plain', 400)).body.data!.changeCampaignBudget;
    expect(lowered).toMatchObject({ status: 'CHANGED', campaign: { budgetYen: 400, issuedYen: 300, remainingYen: 100 } });
    expect(await standing('plain')).toEqual({
      budget_yen: 400,
      slots: [[400, 300, 0]],
      leases: 0,
      coupons: 3,
      audit_rows: 2,
      events: [
        { tenantId: TENANT, campaignId: 'plain', budgetYen: 25_050, previousBudgetYen: 10_000, issuedYen: 300, leasedYenTakenBack: 0 },
        { tenantId: TENANT, campaignId: 'plain', budgetYen: 400, previousBudgetYen: 25_050, issuedYen: 300, leasedYenTakenBack: 0 },
      ],
    });
    // The lowered budget is the one in force: one more coupon, then none.
    await issue('plain', ['a4']);
    const refused = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'plain' } }, asUser(TENANT, 'a5'));
    expect(refused.body.data!.issueCoupon.status).toBe('BUDGET_EXCEEDED');
  });

  it('answers BELOW_ISSUED below what members hold, and changes nothing: no audit row, no event, no key kept', async () => {
    await create({ id: 'held', budgetSlots: 4 });
    await issue('held', ['b1', 'b2', 'b3']);
    const before = await standing('held');
    const answer = await change('held', 299, { ...admin, 'idempotency-key': 'below-1' });
    expect(answer.body.data!.changeCampaignBudget).toMatchObject({
      status: 'BELOW_ISSUED',
      campaign: { budgetYen: 10_000, issuedYen: 300 },
    });
    expect(await standing('held')).toEqual(before);
    const keys = await backend.sql.query("select 1 from idempotency_keys where tenant_id = $1 and key = 'below-1' and expires_at > now()", [
      TENANT,
    ]);
    expect(keys.rowCount).toBe(0);
    // Exactly what members hold is allowed: the campaign is then sold out.
    expect((await change('held', 300)).body.data!.changeCampaignBudget.status).toBe('CHANGED');
  });

  it('splits the new room over the slots by whole coupons, each slot keeping what it issued', async () => {
    await create({ id: 'sliced', budgetSlots: 16, budgetYen: 16_000 });
    await issue('sliced', ['c1', 'c2', 'c3', 'c4', 'c5']);
    await change('sliced', 2_350);
    const { slots } = await standing('sliced');
    const room = (slots as number[][]).map(([budget, issued]) => budget! - issued!);
    expect(room.reduce((sum, yen) => sum + yen, 0)).toBe(2_350 - 500);
    expect(room.slice(1).every((yen) => yen % 100 === 0)).toBe(true);
    expect(room[0]! % 100).toBe(50);
    expect(
      Math.max(...room.map((yen) => Math.floor(yen / 100))) - Math.min(...room.map((yen) => Math.floor(yen / 100))),
    ).toBeLessThanOrEqual(1);
    expect((slots as number[][]).reduce((sum, [, issued]) => sum + issued!, 0)).toBe(500);
  });

  it('takes leased room back before it judges the floor: what members hold, not what processes leased', async () => {
    await create({ id: 'leased', budgetLeaseCoupons: 20 });
    await issue('leased', ['d1', 'd2', 'd3']);
    // The process leases in the background after its first issue: wait for the lease, then issue from it.
    while ((await standing('leased')).leases === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await issue('leased', ['d4']);
    const before = await standing('leased');
    expect((before.slots as number[][])[0]![2]).toBeGreaterThan(100);
    const answer = (await change('leased', 500)).body.data!.changeCampaignBudget;
    expect(answer).toMatchObject({ status: 'CHANGED', campaign: { budgetYen: 500, issuedYen: 400 } });
    const after = await standing('leased');
    expect(after).toMatchObject({ budget_yen: 500, slots: [[500, 400, 0]], leases: 0, coupons: 4 });
    expect((after.events as { leasedYenTakenBack: number }[])[0]!.leasedYenTakenBack).toBeGreaterThan(0);
    await issue('leased', ['d5']);
    const refused = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'leased' } }, asUser(TENANT, 'd6'));
    expect(refused.body.data!.issueCoupon.status).toBe('BUDGET_EXCEEDED');
  });

  it('replays a resend with the same Idempotency-Key: one change, one audit row, one event', async () => {
    await create({ id: 'keyed' });
    const first = await change('keyed', 12_000, { ...admin, 'idempotency-key': 'raise-1' });
    const resent = await change('keyed', 12_000, { ...admin, 'idempotency-key': 'raise-1' });
    expect(resent.headers.get('idempotent-replayed')).toBe('true');
    expect(resent.body).toEqual(first.body);
    expect(await standing('keyed')).toMatchObject({ budget_yen: 12_000, audit_rows: 1 });
    expect(((await standing('keyed')).events as unknown[]).length).toBe(1);
    const reused = await change('keyed', 13_000, { ...admin, 'idempotency-key': 'raise-1' });
    expect(errorCodes(reused)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
  });

  it("is the tenant admin's only: FORBIDDEN to a member, NOT_FOUND for another tenant's campaign, BAD_USER_INPUT for a wrong figure", async () => {
    await create({ id: 'guarded' });
    expect(errorCodes(await change('guarded', 20_000, asUser(TENANT, 'e1')))).toEqual(['FORBIDDEN']);
    expect(errorCodes(await change('guarded', 20_000, asTenantAdmin('elsewhere')))).toEqual(['NOT_FOUND']);
    expect(errorCodes(await change('missing', 20_000))).toEqual(['NOT_FOUND']);
    for (const budgetYen of [0, -100, 1_000_000_001, 0.5])
      expect(errorCodes(await change('guarded', budgetYen))).toEqual(['BAD_USER_INPUT']);
    expect(await standing('guarded')).toMatchObject({ budget_yen: 10_000, audit_rows: 0, events: [] });
  });

  it('is a Hasura action like the others', async () => {
    await create({ id: 'hasura' });
    const response = await callAction(
      backend.app.fetch,
      'changeCampaignBudget',
      { campaignId: 'hasura', budgetYen: 7_000 },
      {
        'x-hasura-role': 'admin',
        'x-hasura-tenant-id': TENANT,
      },
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'CHANGED', campaign: { id: 'hasura', budgetYen: 7_000 } });
  });
});
