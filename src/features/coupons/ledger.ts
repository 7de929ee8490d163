import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.js';

export interface CampaignDrift {
  tenantId: string;
  campaignId: string;
  issuedYen: number;
  couponsYen: number;
}

export interface UsageDrift {
  tenantId: string;
  memberId: string;
  month: string;
  usedYen: number;
  couponsYen: number;
}

export interface MemberOverCap {
  tenantId: string;
  memberId: string;
  month: string;
  couponsYen: number;
  capYen: number;
}

export interface CampaignOverBudget {
  tenantId: string;
  campaignId: string;
  budgetYen: number;
  couponsYen: number;
}

export interface LedgerReport {
  /** True when counters equal facts and no member or campaign went over its limit here. */
  ok: boolean;
  campaignDrift: CampaignDrift[];
  usageDrift: UsageDrift[];
  membersOverCap: MemberOverCap[];
  campaignsOverBudget: CampaignOverBudget[];
  /** Over budget by no more than the campaign already was when it was adopted (npm run db:adopt). */
  legacyOverspend: CampaignOverBudget[];
  /** Over the cap with adopted coupons only: damage brought in, not made here. */
  legacyMembersOverCap: MemberOverCap[];
}

/**
 * Compares every counter with the facts it summarises: a campaign's issued yen (the sum of its
 * budget slots) with the sum of its coupons, each member-month usage row with the sum of that
 * member's coupons in the month, and lists members over the tenant's cap and campaigns over
 * budget. Voided coupons (adopted duplicates) are not facts. Damage adopted with the data (a
 * campaign already overspent, a member already over the cap) is listed as legacy and does not
 * make the ledger fail. With a tenant id it checks that tenant; with null, every tenant.
 *
 * @example const report = await ledgerCheck(db, tenantId)
 */
export async function ledgerCheck(db: Kysely<DB>, tenantId: string | null): Promise<LedgerReport> {
  const tenantFilter = tenantId === null ? sql`true` : sql`t.id = ${tenantId}`;

  const campaigns = await sql<{
    tenant_id: string;
    campaign_id: string;
    budget_yen: number;
    adopted_overspend_yen: number;
    issued_yen: number;
    coupons_yen: number;
  }>`
    select c.tenant_id, c.id as campaign_id, c.budget_yen, c.adopted_overspend_yen,
           (coalesce((select sum(s.issued_yen) from campaign_budget_slots s
                       where s.tenant_id = c.tenant_id and s.campaign_id = c.id), 0)
            + coalesce((select sum(l.issued_yen) from campaign_budget_leases l
                         where l.tenant_id = c.tenant_id and l.campaign_id = c.id), 0))::int as issued_yen,
           coalesce((select sum(k.amount_yen) from coupons k
                      where k.tenant_id = c.tenant_id and k.campaign_id = c.id and k.voided_at is null), 0)::int as coupons_yen
      from campaigns c join tenants t on t.id = c.tenant_id
     where ${tenantFilter}
     order by c.tenant_id, c.id`.execute(db);

  const usage = await sql<{
    tenant_id: string;
    member_id: string;
    month: string;
    used_yen: number;
    coupons_yen: number;
    cap_yen: number;
    only_adopted: boolean;
  }>`
    with facts as (
      select k.tenant_id, k.member_id, k.month, sum(k.amount_yen)::int as coupons_yen, bool_and(k.adopted) as only_adopted
        from coupons k join tenants t on t.id = k.tenant_id
       where ${tenantFilter} and k.voided_at is null
       group by k.tenant_id, k.member_id, k.month
    ), counters as (
      select u.tenant_id, u.member_id, u.month, u.used_yen
        from member_monthly_usage u join tenants t on t.id = u.tenant_id
       where ${tenantFilter}
    )
    select coalesce(f.tenant_id, c.tenant_id) as tenant_id,
           coalesce(f.member_id, c.member_id) as member_id,
           coalesce(f.month, c.month) as month,
           coalesce(c.used_yen, 0) as used_yen,
           coalesce(f.coupons_yen, 0) as coupons_yen,
           t.monthly_cap_yen as cap_yen,
           coalesce(f.only_adopted, false) as only_adopted
      from facts f
      full join counters c on c.tenant_id = f.tenant_id and c.member_id = f.member_id and c.month = f.month
      join tenants t on t.id = coalesce(f.tenant_id, c.tenant_id)
     order by 1, 2, 3`.execute(db);

  const campaignDrift = campaigns.rows
    .filter((r) => r.issued_yen !== r.coupons_yen)
    .map((r) => ({ tenantId: r.tenant_id, campaignId: r.campaign_id, issuedYen: r.issued_yen, couponsYen: r.coupons_yen }));
  const overBudget = campaigns.rows.filter((r) => r.coupons_yen > r.budget_yen);
  const isLegacyOverspend = (r: (typeof overBudget)[number]) => r.coupons_yen - r.budget_yen <= r.adopted_overspend_yen;
  const toOverBudget = (r: (typeof overBudget)[number]) => ({
    tenantId: r.tenant_id,
    campaignId: r.campaign_id,
    budgetYen: r.budget_yen,
    couponsYen: r.coupons_yen,
  });
  const campaignsOverBudget = overBudget.filter((r) => !isLegacyOverspend(r)).map(toOverBudget);
  const legacyOverspend = overBudget.filter(isLegacyOverspend).map(toOverBudget);
  const usageDrift = usage.rows
    .filter((r) => r.used_yen !== r.coupons_yen)
    .map((r) => ({ tenantId: r.tenant_id, memberId: r.member_id, month: r.month, usedYen: r.used_yen, couponsYen: r.coupons_yen }));
  const overCap = usage.rows.filter((r) => r.coupons_yen > r.cap_yen);
  const toOverCap = (r: (typeof overCap)[number]) => ({
    tenantId: r.tenant_id,
    memberId: r.member_id,
    month: r.month,
    couponsYen: r.coupons_yen,
    capYen: r.cap_yen,
  });
  const membersOverCap = overCap.filter((r) => !r.only_adopted).map(toOverCap);
  const legacyMembersOverCap = overCap.filter((r) => r.only_adopted).map(toOverCap);
  const ok = campaignDrift.length + usageDrift.length + membersOverCap.length + campaignsOverBudget.length === 0;
  return { ok, campaignDrift, usageDrift, membersOverCap, campaignsOverBudget, legacyOverspend, legacyMembersOverCap };
}
