import { sql, type Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import { RollbackAndReturn } from '../db/transaction.js';
import { prepare } from '../db/prepared.js';
import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import { notFound } from '../errors.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { takeBudget } from './budget-slots.js';
import { businessMonth } from './month.js';
import type { IssueRequest, IssueResult } from './issue.js';
import { findMemberCoupon, toCoupon, type CouponColumns } from './member-coupons.js';

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
