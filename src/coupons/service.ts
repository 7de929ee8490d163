import { sql, type Kysely, type Transaction } from 'kysely';
import type { CampaignRow, CouponRow, DB } from '../db/schema.js';
import { RollbackAndReturn, type Isolation } from '../db/transaction.js';
import { badInput, notFound } from '../graphql/errors.js';
import { businessMonth } from './month.js';

export type IssueStatus = 'ISSUED' | 'ALREADY_ISSUED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED';

export interface Coupon {
  id: string;
  campaignId: string;
  memberId: string;
  month: string;
  amountYen: number;
  issuedAt: Date;
}

export interface IssueResult {
  status: IssueStatus;
  coupon: Coupon | null;
}

export interface Campaign {
  id: string;
  tenantId: string;
  name: string;
  discountYen: number;
  budgetYen: number;
  budgetSlots: number;
  issuedYen: number;
  createdAt: Date;
}

export const COUPON_ISSUED_TOPIC = 'coupon.issued';
export const MAX_BUDGET_SLOTS = 64;

const toCoupon = (row: CouponRow): Coupon => ({
  id: row.id,
  campaignId: row.campaign_id,
  memberId: row.member_id,
  month: row.month,
  amountYen: row.amount_yen,
  issuedAt: row.issued_at,
});

/** Splits a budget over `slots` rows as evenly as whole yen allow (the first rows take the remainder). */
export function splitBudget(budgetYen: number, slots: number): number[] {
  const base = Math.floor(budgetYen / slots);
  return Array.from({ length: slots }, (_, slot) => base + (slot < budgetYen % slots ? 1 : 0));
}

export interface NewCampaign {
  id: string;
  name: string;
  discountYen: number;
  budgetYen: number;
  budgetSlots: number;
}

export async function insertCampaign(trx: Transaction<DB>, tenantId: string, input: NewCampaign): Promise<Campaign> {
  const slotBudgets = splitBudget(input.budgetYen, input.budgetSlots);
  // A slot that cannot hold one discount would never issue; its yen would be unreachable.
  if (slotBudgets.some((yen) => yen < input.discountYen)) {
    throw badInput('budgetYen / budgetSlots must be at least discountYen: lower budgetSlots', 'budgetSlots');
  }
  const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
  if (!tenant) throw notFound('Tenant');
  const row = await trx
    .insertInto('campaigns')
    .values({
      tenant_id: tenantId,
      id: input.id,
      name: input.name,
      discount_yen: input.discountYen,
      budget_yen: input.budgetYen,
      budget_slots: input.budgetSlots,
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

const toCampaign = (row: CampaignRow, issuedYen: number): Campaign => ({
  id: row.id,
  tenantId: row.tenant_id,
  name: row.name,
  discountYen: row.discount_yen,
  budgetYen: row.budget_yen,
  budgetSlots: row.budget_slots,
  issuedYen,
  createdAt: row.created_at,
});

function campaignsWithIssued(db: Kysely<DB>, tenantId: string) {
  return db
    .selectFrom('campaigns as c')
    .selectAll('c')
    .select((eb) =>
      eb
        .selectFrom('campaign_budget_slots as s')
        .select(sql<number>`coalesce(sum(s.issued_yen), 0)::int`.as('issued'))
        .whereRef('s.tenant_id', '=', 'c.tenant_id')
        .whereRef('s.campaign_id', '=', 'c.id')
        .as('issued_yen'),
    )
    .where('c.tenant_id', '=', tenantId);
}

export async function findCampaign(db: Kysely<DB>, tenantId: string, id: string): Promise<Campaign | null> {
  const row = await campaignsWithIssued(db, tenantId).where('c.id', '=', id).executeTakeFirst();
  return row ? toCampaign(row, row.issued_yen ?? 0) : null;
}

export async function listCampaigns(db: Kysely<DB>, tenantId: string, limit: number): Promise<Campaign[]> {
  const rows = await campaignsWithIssued(db, tenantId).orderBy('c.created_at', 'desc').orderBy('c.id').limit(limit).execute();
  return rows.map((row) => toCampaign(row, row.issued_yen ?? 0));
}

export async function listMemberCoupons(db: Kysely<DB>, tenantId: string, memberId: string, limit: number): Promise<Coupon[]> {
  const rows = await db
    .selectFrom('coupons')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('member_id', '=', memberId)
    .where('voided_at', 'is', null)
    .orderBy('issued_at', 'desc')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toCoupon);
}

export interface IssueRequest {
  tenantId: string;
  memberId: string;
  campaignId: string;
  /** From the server's clock: decides the coupon's month. */
  now: Date;
  timeZone: string;
}

/**
 * Issues one coupon, or says why not. Guarantees, at any concurrency on READ COMMITTED:
 * one coupon per member per campaign, a member's month total within the tenant's cap, the
 * campaign's budget never exceeded, and one outbox event for every coupon and for nothing else.
 *
 * Locks are taken in one global order so that no two issues deadlock: the unique (tenant,
 * campaign, member) index entry, then the member's month row, then the outbox row, then the
 * campaign's budget row last, because it is the hottest and should be held for the shortest time.
 * Each check is decided by the statement that writes (DESIGN §4). A refusal throws
 * RollbackAndReturn: the coupon, usage and outbox rows written so far are undone.
 */
export async function issueCoupon(trx: Transaction<DB>, request: IssueRequest): Promise<IssueResult> {
  const { tenantId, memberId, campaignId } = request;
  const month = businessMonth(request.now, request.timeZone);

  // 1 and 2, in one statement. One per member, on the unique index: a double tap waits here for
  // the first transaction, then sees its coupon. Then the monthly cap, on the member's month row:
  // created with this amount when missing, otherwise increased only while the total stays within
  // the tenant's cap. The month row is written from the coupon insert's RETURNING, so it can only
  // be locked after the coupon's index entry, and not at all when the coupon already existed.
  const attempt = await sql<CouponRow & { discount_yen: number; budget_slots: number; inserted: boolean; within_cap: boolean }>`
    with campaign as (
      select discount_yen, budget_slots from campaigns where tenant_id = ${tenantId} and id = ${campaignId}
    ), inserted as (
      insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at)
      select ${tenantId}, ${campaignId}, ${memberId}, ${month}, discount_yen, ${request.now} from campaign
      on conflict (tenant_id, campaign_id, member_id) where not legacy_duplicate do nothing
      returning *
    ), usage as (
      insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
      select i.tenant_id, i.member_id, i.month, i.amount_yen
        from inserted i join tenants t on t.id = i.tenant_id
       where i.amount_yen <= t.monthly_cap_yen
      on conflict (tenant_id, member_id, month) do update
        set used_yen = member_monthly_usage.used_yen + excluded.used_yen
        where member_monthly_usage.used_yen + excluded.used_yen
              <= (select monthly_cap_yen from tenants where id = excluded.tenant_id)
      returning used_yen
    )
    select campaign.discount_yen, campaign.budget_slots, inserted.*, inserted.id is not null as inserted,
           exists (select 1 from usage) as within_cap
      from campaign left join inserted on true`.execute(trx);
  const row = attempt.rows[0];
  if (!row) throw notFound('Campaign');
  if (!row.inserted) {
    const existing = await trx
      .selectFrom('coupons')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('campaign_id', '=', campaignId)
      .where('member_id', '=', memberId)
      .where('legacy_duplicate', '=', false)
      .executeTakeFirstOrThrow();
    return { status: 'ALREADY_ISSUED', coupon: toCoupon(existing) };
  }
  if (!row.within_cap) throw new RollbackAndReturn<IssueResult>({ status: 'MONTHLY_CAP', coupon: null });
  const coupon = toCoupon(row);

  // 3 and 4. The notification (an outbox row in this transaction) and the budget, last.
  const event = JSON.stringify({ ...coupon, tenantId, issuedAt: coupon.issuedAt.toISOString() });
  if (!(await takeBudget(trx, tenantId, campaignId, coupon.amountYen, row.budget_slots, event))) {
    throw new RollbackAndReturn<IssueResult>({ status: 'BUDGET_EXCEEDED', coupon: null });
  }
  return { status: 'ISSUED', coupon };
}

/**
 * How issueCoupon decides. The server runs `conditionalUpdates`; the benchmark swaps in the peer
 * designs it measures against (naive, SERIALIZABLE, advisory locks), which live in bench/.
 */
export interface CouponIssuer {
  name: string;
  isolation?: Isolation;
  issue(trx: Transaction<DB>, request: IssueRequest): Promise<IssueResult>;
}

export const conditionalUpdates: CouponIssuer = { name: 'conditional updates', issue: (trx, request) => issueCoupon(trx, request) };

/**
 * Writes the coupon's outbox event and takes `amount` from the campaign's budget, in one
 * statement; false when no slot has room (the caller rolls the event back with everything else).
 * The event row is new, so it collides with nothing: the budget row is still the last lock taken.
 *
 * With one slot the budget is one conditional UPDATE: after waiting for the row lock, READ
 * COMMITTED re-checks the WHERE against the newest committed row, so the budget can never be
 * overspent. With several slots an issue takes any slot with room that nobody holds (SKIP
 * LOCKED); only when every slot with room is held does it wait for one, so a request is refused
 * only when no slot has room at all.
 */
async function takeBudget(trx: Transaction<DB>, tenantId: string, campaignId: string, amount: number, slots: number, event: string) {
  const outbox = sql`insert into outbox_events (tenant_id, topic, payload) values (${tenantId}, ${COUPON_ISSUED_TOPIC}, ${event}::jsonb)`;
  if (slots === 1) {
    const result = await sql`
      with event as (${outbox})
      update campaign_budget_slots set issued_yen = issued_yen + ${amount}
       where tenant_id = ${tenantId} and campaign_id = ${campaignId} and slot = 0
         and issued_yen + ${amount} <= budget_yen
      returning slot`.execute(trx);
    return result.rows.length === 1;
  }
  await sql`${outbox}`.execute(trx);
  for (const lock of [sql`for update skip locked`, sql`for update`]) {
    const result = await sql`
      with free as (
        select slot from campaign_budget_slots
         where tenant_id = ${tenantId} and campaign_id = ${campaignId} and issued_yen + ${amount} <= budget_yen
         order by slot
         limit 1
         ${lock}
      )
      update campaign_budget_slots s set issued_yen = s.issued_yen + ${amount}
        from free
       where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and s.slot = free.slot
         and s.issued_yen + ${amount} <= s.budget_yen
      returning s.slot`.execute(trx);
    if (result.rows.length === 1) return true;
  }
  return false;
}
