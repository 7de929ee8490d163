import { sql, type Kysely, type Transaction } from 'kysely';
import type { CampaignRow, CouponRow, DB } from '../db/schema.js';
import { RollbackAndReturn, type Isolation, type OneStatementUnit } from '../db/transaction.js';
import { prepare } from '../db/prepared.js';
import { finishCtes, type Bookkeeping, type FinishValues } from '../bookkeeping/bookkeeping.js';
import { badInput, notFound } from '../errors.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { businessMonth } from './month.js';
import { COUPON_ISSUED_TOPIC, type Coupon, type IssueRequest, type IssueResult } from './issue.js';
import { issueCouponInOneStatement, type OneStatementContext } from './one-statement.js';

export { COUPON_ISSUED_TOPIC, type Coupon, type IssueRequest, type IssueResult, type IssueStatus } from './issue.js';

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
}

export const MAX_BUDGET_SLOTS = 64;
export const MAX_BUDGET_LEASE_COUPONS = 10_000;

type CouponColumns = Pick<CouponRow, 'id' | 'campaign_id' | 'member_id' | 'month' | 'amount_yen' | 'issued_at'>;

const toCoupon = (row: CouponColumns): Coupon => ({
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
  /** 0: no leases. */
  budgetLeaseCoupons?: number;
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
      budget_lease_coupons: input.budgetLeaseCoupons ?? 0,
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
  budgetLeaseCoupons: row.budget_lease_coupons,
  issuedYen,
  createdAt: row.created_at,
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

interface IssueValues {
  tenantId: string;
  campaignId: string;
  memberId: string;
  month: string;
  now: Date;
}

/** The first statement's one row: the campaign (null when there is none), and the member's coupon if one is known. */
interface IssueRow extends Omit<CouponColumns, 'id'> {
  discount_yen: number | null;
  budget_slots: number | null;
  /** Some budget slot had room for one more coupon, as this statement's snapshot saw them. */
  has_room: boolean | null;
  id: string | null;
  /** The coupon above is the one this statement inserted. */
  inserted: boolean | null;
  within_cap: boolean;
  /** With a key: the key is this request's. */
  claimed: boolean;
}

/**
 * The first statement of an issue (docs/design.md §4), keyed or not. With a key it claims it first, and
 * nothing else is written unless the claim is this request's. A campaign with no room left in any
 * budget slot writes nothing either: slots only ever fill up, so a sold-out campaign stays sold
 * out and its refusal needs no lock (a grant is still decided by the budget UPDATE, never by this
 * read). Then one coupon per member, on the unique index: a double tap waits here for the first
 * transaction, then finds its coupon. Then the monthly cap, on the member's month row: created
 * with this amount when missing, otherwise increased only while the total stays within the
 * tenant's cap. The month row is written from the coupon insert's RETURNING, so it can only be
 * locked after the coupon's index entry, and not at all when the coupon already existed. `coupon`
 * also reads the member's coupon as this statement's snapshot shows it, so that ALREADY_ISSUED
 * needs no statement of its own unless that coupon was committed while this statement waited.
 */
function issueStatement(keyed: boolean) {
  return prepare<IssueValues & Partial<ClaimValues>, IssueRow>(
    keyed ? 'coupons.issue+key' : 'coupons.issue',
    (p) => sql`
    with ${keyed ? sql`${claimCte(p)}, ` : sql``}campaign as (
      select c.discount_yen, c.budget_slots,
             exists (select 1 from campaign_budget_slots s
                      where s.tenant_id = c.tenant_id and s.campaign_id = c.id and s.issued_yen + s.leased_yen + c.discount_yen <= s.budget_yen)
             or exists (select 1 from campaign_budget_leases l
                         where l.tenant_id = c.tenant_id and l.campaign_id = c.id and l.issued_yen + c.discount_yen <= l.budget_yen) as has_room
        from campaigns c
       where c.tenant_id = ${p.tenantId} and c.id = ${p.campaignId}${keyed ? sql` and exists (select 1 from claim)` : sql``}
    ), inserted as (
      insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at)
      select ${p.tenantId}, ${p.campaignId}, ${p.memberId}, ${p.month}, discount_yen, ${p.now} from campaign where has_room
      on conflict (tenant_id, campaign_id, member_id) where not legacy_duplicate do nothing
      returning id, campaign_id, member_id, month, amount_yen, issued_at, tenant_id
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
    ), coupon as (
      select id, campaign_id, member_id, month, amount_yen, issued_at, true as inserted from inserted
      union all
      select id, campaign_id, member_id, month, amount_yen, issued_at, false from coupons
       where tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and member_id = ${p.memberId} and not legacy_duplicate
    )
    select c.discount_yen, c.budget_slots, c.has_room, k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at, k.inserted,
           exists (select 1 from usage) as within_cap, ${keyed ? sql`exists (select 1 from claim)` : sql`true`} as claimed
      from (select) as one
      left join campaign c on true
      left join coupon k on true`,
  );
}

const issueStatements = { plain: issueStatement(false), keyed: issueStatement(true) };

/**
 * Issues one coupon, or says why not, as a transaction: what holds, the lock order and where each
 * check takes its conflict are docs/design.md §1 and §4 ("The transaction"). A refusal throws
 * RollbackAndReturn: the coupon, usage and outbox rows written so far are undone.
 */
export async function issueCoupon(
  trx: Transaction<DB>,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
): Promise<IssueResult> {
  const { tenantId, memberId, campaignId } = request;
  const values = { tenantId, campaignId, memberId, month: businessMonth(request.now, request.timeZone), now: request.now };
  const row = bookkeeping.claim
    ? (await issueStatements.keyed.execute(trx, { ...values, ...bookkeeping.claim })).rows[0]!
    : (await issueStatements.plain.execute(trx, values)).rows[0]!;
  bookkeeping.claimed(row.claimed);
  if (row.discount_yen === null || row.budget_slots === null) throw notFound('Campaign');
  if (!row.inserted) {
    if (row.id !== null) return { status: 'ALREADY_ISSUED', coupon: toCoupon({ ...row, id: row.id }) };
    // No coupon inserted and none visible: either sold out (nothing was tried), or the insert met
    // a coupon committed while it waited for the unique index entry.
    if (!row.has_room) throw new RollbackAndReturn<IssueResult>({ status: 'BUDGET_EXCEEDED', coupon: null });
    return { status: 'ALREADY_ISSUED', coupon: await findMemberCoupon(trx, request) };
  }
  if (!row.within_cap) throw new RollbackAndReturn<IssueResult>({ status: 'MONTHLY_CAP', coupon: null });
  const coupon = toCoupon({ ...row, id: row.id! });
  const result: IssueResult = { status: 'ISSUED', coupon };
  const taken = await takeBudget(
    trx,
    row.budget_slots,
    {
      tenantId,
      campaignId,
      amount: coupon.amountYen,
      event: JSON.stringify({ ...coupon, tenantId, issuedAt: coupon.issuedAt.toISOString() }),
      ...bookkeeping.finish(result),
    },
    bookkeeping.keyed,
  );
  if (!taken) throw new RollbackAndReturn<IssueResult>({ status: 'BUDGET_EXCEEDED', coupon: null });
  return result;
}

/** The member's coupon of the campaign, committed by a transaction the first statement waited for. */
async function findMemberCoupon(trx: Transaction<DB>, { tenantId, campaignId, memberId }: IssueRequest): Promise<Coupon> {
  const existing = await trx
    .selectFrom('coupons')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('member_id', '=', memberId)
    .where('legacy_duplicate', '=', false)
    .executeTakeFirstOrThrow();
  return toCoupon(existing);
}

/**
 * How issueCoupon decides (AppServices.algorithms). The server runs `conditionalUpdates`; the naive
 * test stands the read-check-write version in for it, and the benchmark the peer designs it measures against (naive, SERIALIZABLE, advisory locks), which live in test/, and
 * leave the bookkeeping to runMutation (`claimsKey` unset).
 */
export interface CouponIssuer {
  name: string;
  isolation?: Isolation;
  /** The first statement of `issue` carries the Idempotency-Key claim. */
  claimsKey?: boolean;
  issue(trx: Transaction<DB>, request: IssueRequest, bookkeeping: Bookkeeping<IssueResult>): Promise<IssueResult>;
  /** The issue as one statement in its own implicit transaction, tried before `issue` (runInOneStatement). */
  oneStatement?: (
    db: Kysely<DB>,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    context: OneStatementContext,
  ) => ReturnType<OneStatementUnit<IssueResult>>;
}

/**
 * The product: one statement for every common outcome, and the transaction (issueCoupon) for what
 * that statement leaves to it (a double tap committed while it waited, timeouts not in force, too
 * little of the deadline left).
 */
export const conditionalUpdates: CouponIssuer = {
  name: 'conditional updates',
  claimsKey: true,
  issue: issueCoupon,
  oneStatement: issueCouponInOneStatement,
};

interface BudgetValues extends FinishValues {
  tenantId: string;
  campaignId: string;
  amount: number;
  /** The outbox event's payload (JSON). */
  event: string;
}

/** How a statement finds the budget row it takes from (see takeBudget). */
type SlotChoice = 'the only slot' | 'a free slot' | 'wait for a slot';

/**
 * Takes `amount` from the campaign's budget; written with it, only when it was taken: the
 * coupon's outbox event, the audit row and (keyed) the stored response. These rows are new or
 * already held by this transaction, so they collide with nothing: the budget row is still the last
 * lock taken, and nothing runs between it and COMMIT. `room`: whether any slot had room as this
 * statement's snapshot saw them.
 */
function budgetStatement(choice: SlotChoice, keyed: boolean) {
  const name = `coupons.budget.${choice === 'the only slot' ? 'row' : choice === 'a free slot' ? 'skip' : 'wait'}${keyed ? '+key' : ''}`;
  return prepare<BudgetValues, { slot: number | null; room: boolean }>(name, (p) => {
    // Leased-out yen is not this row's to issue (leases: the one statement takes from them; this path does not).
    const hasRoom = sql`tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and issued_yen + leased_yen + ${p.amount} <= budget_yen`;
    const taken =
      choice === 'the only slot'
        ? sql`update campaign_budget_slots set issued_yen = issued_yen + ${p.amount} where ${hasRoom} and slot = 0 returning slot`
        : sql`
          with free as (
            select slot from campaign_budget_slots where ${hasRoom}
             order by slot limit 1 ${choice === 'a free slot' ? sql`for update skip locked` : sql`for update`}
          )
          update campaign_budget_slots s set issued_yen = s.issued_yen + ${p.amount}
            from free
           where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId} and s.slot = free.slot
             and s.issued_yen + s.leased_yen + ${p.amount} <= s.budget_yen
          returning s.slot`;
    const wasTaken = sql`exists (select 1 from taken)`;
    return sql`
      with taken as (${taken}),
      event as (
        insert into outbox_events (tenant_id, topic, payload)
        select ${p.tenantId}, ${COUPON_ISSUED_TOPIC}, ${p.event}::jsonb where ${wasTaken}
      ), ${finishCtes(p, keyed, wasTaken)}
      select (select slot from taken) as slot, exists (select 1 from campaign_budget_slots where ${hasRoom}) as room`;
  });
}

const budgetStatements = {
  plain: {
    row: budgetStatement('the only slot', false),
    skip: budgetStatement('a free slot', false),
    wait: budgetStatement('wait for a slot', false),
  },
  keyed: {
    row: budgetStatement('the only slot', true),
    skip: budgetStatement('a free slot', true),
    wait: budgetStatement('wait for a slot', true),
  },
};

/**
 * False when no slot has room (the caller rolls back). With one slot the budget is one conditional
 * UPDATE: after waiting for the row lock, READ COMMITTED re-checks the WHERE against the newest
 * committed row, so the budget can never be overspent. With several slots an issue takes any slot
 * with room that nobody holds (SKIP LOCKED). Only when slots with room exist but are all held does
 * it wait for one; when none has room it refuses at once, since slots only ever fill up.
 */
async function takeBudget(trx: Transaction<DB>, slots: number, values: BudgetValues, keyed: boolean): Promise<boolean> {
  const statements = keyed ? budgetStatements.keyed : budgetStatements.plain;
  if (slots === 1) return (await statements.row.execute(trx, values)).rows[0]!.slot !== null;
  const free = (await statements.skip.execute(trx, values)).rows[0]!;
  if (free.slot !== null) return true;
  if (!free.room) return false;
  return (await statements.wait.execute(trx, values)).rows[0]!.slot !== null;
}
