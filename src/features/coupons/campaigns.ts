import { sql, type Kysely, type Transaction } from 'kysely';
import type { CampaignRow, DB } from '../../db/schema.js';
import { badInput, notFound } from '../../core/errors.js';

/** A campaign's reads and writes: its row, the budget split over slot rows, and what it has issued. */

export interface Campaign {
  id: string;
  tenantId: string;
  name: string;
  discountYen: number;
  budgetYen: number;
  budgetSlots: number;
  budgetLeaseCoupons: number;
  issuedYen: number;
  createdAt: Date;
  /** Issues are answered from then on; before it NOT_STARTED (the database's clock decides). */
  startsAt: Date;
  /** From then on issues are ENDED; null: no end. */
  endsAt: Date | null;
  /** Its coupons are EXPIRED from then on, unless redeemed or held; null: never. */
  couponsExpireAt: Date | null;
}

export const MAX_BUDGET_SLOTS = 64;
export const MAX_BUDGET_LEASE_COUPONS = 10_000;

/**
 * How a campaign's budget is split over its slot rows (AppServices.budgetSplit; test/naive keeps the
 * even split by yen, which strands up to a coupon in every slot).
 */
export type BudgetSplit = (budgetYen: number, discountYen: number, slots: number) => number[];

/**
 * Splits a budget over `slots` rows by whole coupons: the campaign's coupons (budgetYen /
 * discountYen, rounded down) as evenly as whole coupons allow, the first rows taking one more, and
 * the yen no coupon can use on row 0. Every coupon the budget pays for can then be issued from some
 * row, and a campaign sold out in every row has less than one coupon left in all.
 */
export const splitByCoupons: BudgetSplit = (budgetYen, discountYen, slots) => {
  const coupons = Math.floor(budgetYen / discountYen);
  const perSlot = Math.floor(coupons / slots);
  return Array.from(
    { length: slots },
    (_, slot) => (perSlot + (slot < coupons % slots ? 1 : 0)) * discountYen + (slot === 0 ? budgetYen - coupons * discountYen : 0),
  );
};

export interface NewCampaign {
  id: string;
  name: string;
  discountYen: number;
  budgetYen: number;
  budgetSlots: number;
  /** 0: no leases. */
  budgetLeaseCoupons?: number;
  /** Absent: from its creation. */
  startsAt?: Date | null;
  /** Absent: no end. After startsAt. */
  endsAt?: Date | null;
  /** Absent: its coupons never expire. Not before startsAt. */
  couponsExpireAt?: Date | null;
}

/**
 * The period's checks against the start that will be stored: `now`, the database's time of the
 * creation, when no start is given (so that one clock judges an end "after the start").
 */
function checkPeriod(input: NewCampaign, now: Date): { startsAt: Date } {
  const startsAt = input.startsAt ?? now;
  if (input.endsAt && input.endsAt.getTime() <= startsAt.getTime()) {
    throw badInput(`endsAt must be after startsAt (${startsAt.toISOString()})`, 'endsAt');
  }
  if (input.couponsExpireAt && input.couponsExpireAt.getTime() < startsAt.getTime()) {
    throw badInput(`couponsExpireAt must not be before startsAt (${startsAt.toISOString()})`, 'couponsExpireAt');
  }
  return { startsAt };
}

/**
 * Inserts a campaign and its budget slot rows, the budget split by `split`.
 *
 * @example const campaign = await insertCampaign(trx, tenantId, newCampaign, splitByCoupons)
 */
export async function insertCampaign(
  trx: Transaction<DB>,
  tenantId: string,
  input: NewCampaign,
  split: BudgetSplit = splitByCoupons,
): Promise<Campaign> {
  const slotBudgets = split(input.budgetYen, input.discountYen, input.budgetSlots);
  // A slot that cannot hold one coupon would never issue: every slot must pay for one at least.
  if (slotBudgets.some((yen) => yen < input.discountYen)) {
    throw badInput('budgetSlots must be at most budgetYen / discountYen: every slot holds one coupon at least', 'budgetSlots');
  }
  // The database's time, to the millisecond the API shows: a campaign without startsAt starts at its creation.
  const tenant = await trx
    .selectFrom('tenants')
    .select(['id', sql<Date>`date_trunc('milliseconds', now())`.as('now')])
    .where('id', '=', tenantId)
    .executeTakeFirst();
  if (!tenant) throw notFound('Tenant');
  const { startsAt } = checkPeriod(input, tenant.now);
  const row = await trx
    .insertInto('campaigns')
    .values({
      tenant_id: tenantId,
      id: input.id,
      name: input.name,
      discount_yen: input.discountYen,
      budget_yen: input.budgetYen,
      budget_slots: input.budgetSlots,
      budget_lease_coupons: input.budgetLeaseCoupons ?? 0,
      starts_at: startsAt,
      ends_at: input.endsAt ?? null,
      coupons_expire_at: input.couponsExpireAt ?? null,
    })
    .onConflict((oc) => oc.columns(['tenant_id', 'id']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row) throw badInput(`A campaign with id "${input.id}" already exists`, 'id');
  await trx
    .insertInto('campaign_budget_slots')
    .values(slotBudgets.map((budget_yen, slot) => ({ tenant_id: tenantId, campaign_id: input.id, slot, budget_yen })))
    .execute();
  return toCampaign(row, 0);
}

/**
 * A campaign row as the API's campaign, with the yen issued from its budget.
 *
 * @example const campaign = toCampaign(row, issuedYen)
 */
export const toCampaign = (row: CampaignRow, issuedYen: number): Campaign => ({
  id: row.id,
  tenantId: row.tenant_id,
  name: row.name,
  discountYen: row.discount_yen,
  budgetYen: row.budget_yen,
  budgetSlots: row.budget_slots,
  budgetLeaseCoupons: row.budget_lease_coupons,
  issuedYen,
  createdAt: row.created_at,
  startsAt: row.starts_at,
  endsAt: row.ends_at,
  couponsExpireAt: row.coupons_expire_at,
});

function campaignsWithIssued(db: Kysely<DB>, tenantId: string) {
  return db
    .selectFrom('campaigns as c')
    .selectAll('c')
    .select(
      sql<number>`(coalesce((select sum(s.issued_yen) from campaign_budget_slots s where s.tenant_id = c.tenant_id and s.campaign_id = c.id), 0)
        + coalesce((select sum(l.issued_yen) from campaign_budget_leases l where l.tenant_id = c.tenant_id and l.campaign_id = c.id), 0))::int`.as(
        'issued_yen',
      ),
    )
    .where('c.tenant_id', '=', tenantId);
}

/**
 * One campaign of the tenant, or null.
 *
 * @example const campaign = await findCampaign(trx, tenantId, campaignId)
 */
export async function findCampaign(db: Kysely<DB>, tenantId: string, id: string): Promise<Campaign | null> {
  const row = await campaignsWithIssued(db, tenantId).where('c.id', '=', id).executeTakeFirst();
  return row ? toCampaign(row, row.issued_yen ?? 0) : null;
}

/**
 * The tenant's campaigns, newest first.
 *
 * @example const campaigns = await listCampaigns(trx, tenantId, 100)
 */
export async function listCampaigns(db: Kysely<DB>, tenantId: string, limit: number): Promise<Campaign[]> {
  const rows = await campaignsWithIssued(db, tenantId).orderBy('c.created_at', 'desc').orderBy('c.id').limit(limit).execute();
  return rows.map((row) => toCampaign(row, row.issued_yen ?? 0));
}

/**
 * What createCampaign's audit row names.
 *
 * @example campaignEntities({ campaign }) // [campaign.id]
 */
export const campaignEntities = ({ campaign }: { campaign: Campaign }): string[] => [campaign.id];

/**
 * createCampaign's unit of work (runMutation calls it): the campaign and its budget rows, split as `split` says.
 *
 * @example const { campaign } = await createCampaign(trx, { tenantId, campaign: newCampaign }, bookkeeping, splitByCoupons)
 */
export async function createCampaign(
  trx: Transaction<DB>,
  { tenantId, campaign }: { tenantId: string; campaign: NewCampaign },
  _bookkeeping: unknown,
  split: BudgetSplit,
): Promise<{ campaign: Campaign }> {
  return { campaign: await insertCampaign(trx, tenantId, campaign, split) };
}
