import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { FinishBase, Bookkeeping } from '../bookkeeping/bookkeeping.js';
import { prepare } from '../db/prepared.js';
import type { DB } from '../db/schema.js';
import { SqlState, sqlStateOf } from '../db/sqlstate.js';
import { AS_TRANSACTION, RollbackAndReturn, type TransactionSettings } from '../db/transaction.js';
import { notFound } from '../errors.js';
import { traceparentOf, tracing } from '../tracing.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { productLeasing, type BudgetLeases, type BudgetLeasing } from './leases.js';
import { businessMonth } from './month.js';
import { COUPON_ISSUED_TOPIC, type IssueRequest, type IssueResult } from './issue.js';

/** The SQLSTATE of coupon_issue_refused() (db/migrations/008_one_statement_issue.sql); its message is the outcome. */
export const ISSUE_REFUSED = 'CR001';
/** The CHECKs an issue's budget UPDATE breaks when the last room went while it waited for the row. */
const LEASED_BUDGET_CHECK = 'campaign_budget_slots_leased_within_budget';
/** Statements an issue on a campaign with leases may spend finding a row with room (see issueCouponInOneStatement). */
const LEASED_ATTEMPTS = 4;
const BUDGET_CHECKS = new Set([
  'campaign_budget_slots_within_budget',
  'campaign_budget_slots_leased_within_budget',
  'campaign_budget_leases_within_lease',
]);

interface OneStatementValues extends FinishBase {
  tenantId: string;
  campaignId: string;
  memberId: string;
  month: string;
  /** Made here, so that the stored response, written with the claim before the coupon, can name it. */
  couponId: string;
  now: Date;
  /** `now` as JSON writes it, for the outbox payload and the stored response. */
  issuedAt: string;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  /** This process's name on the leases it takes (BudgetLeases). */
  leaseHolder: string;
  /** The attempt's trace, for the outbox event (a transaction's BEGIN sets it as app.traceparent; there is no BEGIN here). */
  traceparent: string | null;
}

type Outcome = 'AS_TRANSACTION' | 'KEY_HELD' | 'NOT_FOUND' | 'ALREADY_ISSUED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED' | 'ISSUE';

interface OneStatementRow {
  outcome: Outcome;
  id: string | null;
  campaign_id: string | null;
  member_id: string | null;
  month: string | null;
  amount_yen: number | null;
  issued_at: Date | null;
  budget_lease_coupons: number | null;
  /** Coupons left in this process's own lease, when the issue took from it. */
  own_lease_left: number | null;
}

/**
 * The whole issue as one statement in its own implicit transaction (docs/design.md §4): the lock
 * order is the transaction's (the Idempotency-Key, the coupon's unique index entry, the member's
 * month row, a budget row last), and the budget row is held only for what is left of this
 * statement and its commit, never across a round trip.
 *
 * It first reads, in its snapshot, what it can answer without writing: a missing campaign, the
 * member's coupon (ALREADY_ISSUED), a month already at the cap, a campaign with no room. A refusal
 * read there writes nothing (with a key, only its claim, committed expired). Otherwise it issues:
 * each write is made from the previous one's RETURNING, so a write that finds no room stops the
 * chain, and whatever the chain wrote is rolled back by an error: the budget UPDATE adds the
 * discount unconditionally, so a slot that filled up while this statement waited for it breaks its
 * CHECK (BUDGET_EXCEEDED); a month that reached the cap meanwhile, or a coupon committed by a
 * double tap meanwhile, raise through coupon_issue_refused (MONTHLY_CAP; AS_TRANSACTION, answered
 * by the transaction). Nothing is written unless the sessions' timeouts are in force (the role's
 * defaults; a pooler's older server connection may lack them): then it answers AS_TRANSACTION.
 */
function oneStatement(keyed: boolean, leasing: BudgetLeasing) {
  const name = `coupons.issue.one${leasing === productLeasing ? '' : `.${leasing.name}`}${keyed ? '+key' : ''}`;
  return prepare<OneStatementValues & Partial<ClaimValues>, OneStatementRow>(name, (p) => {
    const room = sql`s.issued_yen + s.leased_yen + d.discount_yen <= s.budget_yen`;
    const leaseRoom = sql`l.tenant_id = ${p.tenantId} and l.campaign_id = ${p.campaignId} and l.issued_yen + d.discount_yen <= l.budget_yen`;
    const slotWith = (lock: 'for update skip locked' | 'for update') => sql`(
      select s.slot from campaign_budget_slots s
       where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId} and ${room}
       order by s.slot limit 1 ${sql.raw(lock)})`;
    // A coupon as JSON writes IssueResult (its time as Date.prototype.toJSON does), so that a replay reads as the first answer did.
    const couponJson = (status: string, k: string) =>
      sql.raw(`jsonb_build_object('status', '${status}', 'coupon', jsonb_build_object('id', ${k}.id, 'campaignId', ${k}.campaign_id,
        'memberId', ${k}.member_id, 'month', ${k}.month, 'amountYen', ${k}.amount_yen,
        'issuedAt', to_char(${k}.issued_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))`);
    return sql`
    with guard as (
      select current_setting('lock_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.lockTimeoutMs}::int / 1000.0)
         and current_setting('statement_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.statementTimeoutMs}::int / 1000.0)
             as ok
    ), campaign as (
      select c.discount_yen, c.budget_slots, c.budget_lease_coupons, t.monthly_cap_yen,
             exists (select 1 from campaign_budget_slots s
                      where s.tenant_id = c.tenant_id and s.campaign_id = c.id and s.issued_yen + s.leased_yen + c.discount_yen <= s.budget_yen)
             or exists (select 1 from campaign_budget_leases l
                         where l.tenant_id = c.tenant_id and l.campaign_id = c.id and l.issued_yen + c.discount_yen <= l.budget_yen) as has_room
        from campaigns c join tenants t on t.id = c.tenant_id
       where c.tenant_id = ${p.tenantId} and c.id = ${p.campaignId}
    ), seen as (
      select id, campaign_id, member_id, month, amount_yen, issued_at from coupons
       where tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and member_id = ${p.memberId} and not legacy_duplicate
    ), facts as (
      -- What this statement's snapshot answers, before it writes anything.
      select g.ok, c.discount_yen, c.budget_slots, c.budget_lease_coupons,
             case
               when c.discount_yen is null then 'NOT_FOUND'
               when exists (select 1 from seen) then 'ALREADY_ISSUED'
               when coalesce((select u.used_yen from member_monthly_usage u
                               where u.tenant_id = ${p.tenantId} and u.member_id = ${p.memberId} and u.month = ${p.month}), 0)
                    + c.discount_yen > c.monthly_cap_yen then 'MONTHLY_CAP'
               when not c.has_room then 'BUDGET_EXCEEDED'
               else 'ISSUE'
             end as outcome
        from guard g left join campaign c on true
    ), ${
      keyed
        ? sql`${claimCte(p, {
            from: sql`facts f`,
            when: sql`f.ok`,
            // The answer this statement keeps when it commits. A refusal it read commits its claim
            // expired; every other ending raises and rolls back.
            response: sql`case f.outcome
              when 'ISSUE' then jsonb_build_object('status', 'ISSUED', 'coupon', jsonb_build_object('id', ${p.couponId}::text,
                'campaignId', ${p.campaignId}::text, 'memberId', ${p.memberId}::text, 'month', ${p.month}::text,
                'amountYen', f.discount_yen, 'issuedAt', ${p.issuedAt}::text))
              when 'ALREADY_ISSUED' then (select ${couponJson('ALREADY_ISSUED', 'k')} from seen k) end`,
            kept: sql`f.outcome in ('ISSUE', 'ALREADY_ISSUED')`,
          })}, `
        : sql``
    }decision as (
      select case
               when not f.ok then 'AS_TRANSACTION'
               ${keyed ? sql`when not exists (select 1 from claim) then 'KEY_HELD'` : sql``}
               else f.outcome
             end as outcome, f.discount_yen, f.budget_slots, f.budget_lease_coupons
        from facts f
    ), inserted as (
      insert into coupons (tenant_id, id, campaign_id, member_id, month, amount_yen, issued_at)
      select ${p.tenantId}, ${p.couponId}::uuid, ${p.campaignId}, ${p.memberId}, ${p.month}, discount_yen, ${p.now} from decision where outcome = 'ISSUE'
      on conflict (tenant_id, campaign_id, member_id) where not legacy_duplicate do nothing
      returning id, campaign_id, member_id, month, amount_yen, issued_at
    ), usage as (
      insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
      select ${p.tenantId}, ${p.memberId}, ${p.month}, amount_yen from inserted
      on conflict (tenant_id, member_id, month) do update
        set used_yen = member_monthly_usage.used_yen + excluded.used_yen
        where member_monthly_usage.used_yen + excluded.used_yen
              <= (select monthly_cap_yen from tenants where id = excluded.tenant_id)
      returning used_yen
    ), lease as (
      -- The lease to take from; none: the budget row. Nothing is looked at unless the month row was written.
      select ${leasing.leaseToTake({
        holder: p.leaseHolder,
        leaseRoom,
        budgetRowRoom: sql`exists (select 1 from campaign_budget_slots s
                                  where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId} and ${room})`,
      })} as holder
        from decision d where d.budget_lease_coupons > 0 and exists (select 1 from usage)
    ), leased as (
      update campaign_budget_leases l set issued_yen = l.issued_yen + i.amount_yen
        from inserted i, lease
       where l.tenant_id = ${p.tenantId} and l.campaign_id = ${p.campaignId} and l.holder = lease.holder
      returning case when l.holder = ${p.leaseHolder} then (l.budget_yen - l.issued_yen) / i.amount_yen end as own_lease_left
    ), chosen as (
      -- One slot: it. Several: one with room that nobody holds, else one with room after waiting for
      -- it, else slot 0, whose CHECK then refuses. Nothing is looked at unless the month row was
      -- written and no lease was taken.
      select case when d.budget_slots = 1 then 0
                  else coalesce(${slotWith('for update skip locked')}, ${slotWith('for update')}, 0) end as slot
        from decision d where exists (select 1 from usage) and (select holder from lease) is null
    ), slotted as (
      update campaign_budget_slots s set issued_yen = s.issued_yen + i.amount_yen
        from inserted i, chosen
       where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId} and s.slot = chosen.slot
      returning s.slot
    ), taken as (
      select null::int as own_lease_left from slotted
      union all
      select own_lease_left from leased
    ), event as (
      insert into outbox_events (tenant_id, topic, payload, traceparent)
      select ${p.tenantId}, ${COUPON_ISSUED_TOPIC},
             jsonb_build_object('id', i.id, 'campaignId', i.campaign_id, 'memberId', i.member_id, 'month', i.month,
                                'amountYen', i.amount_yen, 'issuedAt', ${p.issuedAt}::text, 'tenantId', ${p.tenantId}::text),
             ${p.traceparent}::text
        from inserted i where exists (select 1 from taken)
    ), coupon as (
      select id, campaign_id, member_id, month, amount_yen, issued_at from inserted where exists (select 1 from taken)
      union all
      select id, campaign_id, member_id, month, amount_yen, issued_at from seen where (select outcome from decision) = 'ALREADY_ISSUED'
    ), audit_row as (
      insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
      select ${p.auditTenantId}, ${p.actorUserId}, ${p.role}, ${p.operation}, array[k.id::text, k.campaign_id], ${p.requestId} from coupon k
    )
    select d.outcome, k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at, d.budget_lease_coupons,
           (select own_lease_left from taken) as own_lease_left,
           case
             when d.outcome = 'ISSUE' and not exists (select 1 from inserted) then coupon_issue_refused('AS_TRANSACTION')
             when exists (select 1 from inserted) and not exists (select 1 from usage) then coupon_issue_refused('MONTHLY_CAP')
           end as refused${
             keyed
               ? // A refusal's expired claim changes no answer if a crash or a failover loses it (the key
                 // runs afresh either way), so its commit does not wait for the WAL flush or a standby.
                 sql`,
           case when d.outcome in ('NOT_FOUND', 'MONTHLY_CAP', 'BUDGET_EXCEEDED')
                then set_config('synchronous_commit', 'off', true) end as commit_unflushed`
               : sql``
           }
      from decision d left join coupon k on true`;
  });
}

const statementsByLeasing = new Map<BudgetLeasing, { plain: ReturnType<typeof oneStatement>; keyed: ReturnType<typeof oneStatement> }>();
const statementsFor = (leasing: BudgetLeasing) => {
  let statements = statementsByLeasing.get(leasing);
  if (!statements) {
    statements = { plain: oneStatement(false, leasing), keyed: oneStatement(true, leasing) };
    statementsByLeasing.set(leasing, statements);
  }
  return statements;
};
statementsFor(productLeasing);

/** What the statement runs under, and the process's leases. */
export interface OneStatementContext {
  timeouts: Pick<TransactionSettings, 'lockTimeoutMs' | 'statementTimeoutMs'>;
  leases: Pick<BudgetLeases, 'holder' | 'issued' | 'leasing'>;
}

const refusal = (status: 'MONTHLY_CAP' | 'BUDGET_EXCEEDED') => new RollbackAndReturn<IssueResult>({ status, coupon: null });

/**
 * issueCoupon as one statement (see oneStatement): ISSUED, ALREADY_ISSUED and every refusal in one
 * round trip, keyed or not. AS_TRANSACTION when the transaction must decide (runInOneStatement).
 * Every refusal has written nothing (keyed: its claim, committed expired): it is a RollbackAndReturn, as in the transaction.
 */
export async function issueCouponInOneStatement(
  db: Kysely<DB>,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  { timeouts, leases }: OneStatementContext,
): Promise<IssueResult | typeof AS_TRANSACTION> {
  const { tenantId, memberId, campaignId, now } = request;
  const values: OneStatementValues = {
    tenantId,
    campaignId,
    memberId,
    month: businessMonth(now, request.timeZone),
    couponId: randomUUID(),
    now,
    issuedAt: now.toISOString(),
    lockTimeoutMs: timeouts.lockTimeoutMs,
    statementTimeoutMs: timeouts.statementTimeoutMs,
    leaseHolder: leases.holder,
    traceparent: tracing.enabled ? traceparentOf() : null,
    ...bookkeeping.finishInStatement(),
  };
  const statements = statementsFor(leases.leasing);
  let row: OneStatementRow | null = null;
  for (let attempt = 1; row === null; attempt++) {
    try {
      row = bookkeeping.claim
        ? (await statements.keyed.execute(db, { ...values, ...bookkeeping.claim })).rows[0]!
        : (await statements.plain.execute(db, values)).rows[0]!;
    } catch (error) {
      const state = sqlStateOf(error);
      const constraint = (error as { constraint?: string }).constraint ?? '';
      // The budget row filled up while this issue waited for it, but yen is leased out: a lease may
      // still have room, and the statement rolled back whole, so a fresh snapshot decides again.
      if (state === SqlState.checkViolation && constraint === LEASED_BUDGET_CHECK && attempt < LEASED_ATTEMPTS) continue;
      if (state === SqlState.checkViolation && BUDGET_CHECKS.has(constraint)) throw refusal('BUDGET_EXCEEDED');
      if (state !== ISSUE_REFUSED) throw error;
      const outcome = (error as Error).message as Outcome;
      if (outcome === 'AS_TRANSACTION') return AS_TRANSACTION;
      if (outcome === 'NOT_FOUND') throw notFound('Campaign');
      if (outcome === 'MONTHLY_CAP' || outcome === 'BUDGET_EXCEEDED') throw refusal(outcome);
      throw error;
    }
  }
  switch (row.outcome) {
    case 'AS_TRANSACTION':
      return AS_TRANSACTION;
    case 'KEY_HELD':
      return bookkeeping.claimed(false) as never;
    case 'NOT_FOUND':
      throw notFound('Campaign');
    case 'MONTHLY_CAP':
    case 'BUDGET_EXCEEDED':
      throw refusal(row.outcome);
    case 'ALREADY_ISSUED':
    case 'ISSUE': {
      if (row.outcome === 'ISSUE' && row.budget_lease_coupons) {
        leases.issued({ tenantId, campaignId, leaseCoupons: row.budget_lease_coupons, ownLeft: row.own_lease_left });
      }
      return {
        status: row.outcome === 'ISSUE' ? 'ISSUED' : 'ALREADY_ISSUED',
        coupon: {
          id: row.id!,
          campaignId: row.campaign_id!,
          memberId: row.member_id!,
          month: row.month!,
          amountYen: row.amount_yen!,
          issuedAt: row.issued_at!,
        },
      };
    }
  }
}
