import { sql, type RawBuilder } from 'kysely';
import type { FinishBase } from '../bookkeeping/bookkeeping.js';
import { prepare } from '../../db/prepared.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { campaignHasRoom, hasShape, takeBudgetCtes, tookNothingIsFinal, type BuiltFor } from './budget.js';
import { productLeasing, type BudgetLeasing } from './leases.js';
import { expiredBy } from './member-coupons.js';
import { ISSUE_TIME, jsonTimeOf, monthOf, periodRefusal } from './period.js';

/**
 * The SQL of issueCoupon for one member: the statement an issue runs, whether in its own implicit
 * transaction or inside one (issue.ts runs it and reads its row). A batch's statement is in
 * issue-batch.ts and shares this file's parts.
 */

/** The outbox topic of an issued coupon, written by the statement that issues it. */
export const COUPON_ISSUED_TOPIC = 'coupon.issued';

/** The SQLSTATE of coupon_issue_refused() (db/migrations/008_one_statement_issue.sql); its message is the outcome. */
export const ISSUE_REFUSED = 'CR001';

export interface IssueValues extends FinishBase {
  tenantId: string;
  campaignId: string;
  memberId: string;
  /** The IANA time zone of business months: the coupon's month is its issue time's (period.ts) there. */
  timeZone: string;
  /** Made here, so that the stored response, written with the claim before the coupon, can name it. */
  couponId: string;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  /** This process's name on the leases it takes (BudgetLeases). */
  leaseHolder: string;
  /** Where among the slots this issue starts looking (0 to MAX_BUDGET_SLOTS - 1), so that concurrent issues spread. */
  spread: number;
  /** The attempt's trace, for the outbox event (the column's default reads a transaction's app.traceparent; one statement has no BEGIN to set it). */
  traceparent: string | null;
}

export type Outcome =
  | 'AS_TRANSACTION'
  | 'KEY_HELD'
  | 'NOT_FOUND'
  | 'OTHER_SHAPE'
  | 'NOT_STARTED'
  | 'ENDED'
  | 'ALREADY_ISSUED'
  | 'MONTHLY_CAP'
  | 'BUDGET_EXCEEDED'
  | 'ISSUE';

/** The answers a statement reads in its snapshot and writes nothing for (keyed: its claim, committed expired). */
const SNAPSHOT_REFUSALS = ['NOT_FOUND', 'NOT_STARTED', 'ENDED', 'MONTHLY_CAP', 'BUDGET_EXCEEDED'] as const;

/** SNAPSHOT_REFUSALS as a SQL list. */
const snapshotRefusals = sql.raw(SNAPSHOT_REFUSALS.map((outcome) => `'${outcome}'`).join(', '));

export interface IssueRow {
  outcome: Outcome;
  id: string | null;
  campaign_id: string | null;
  member_id: string | null;
  month: string | null;
  amount_yen: number | null;
  issued_at: Date | null;
  /** The campaign's coupons_expire_at: the coupon's expiresAt. */
  expires_at: Date | null;
  /**
   * What the coupon's status is read from (CouponStatusColumns), in the statement's snapshot, so
   * that an answer showing it costs no second read: the row of the coupon found (ALREADY_ISSUED);
   * for the coupon the statement issued, nulls and whether its campaign's couponsExpireAt has passed.
   */
  redeemed_at: Date | null;
  voided_at: Date | null;
  held_by_order_id: string | null;
  expired: boolean | null;
  budget_slots: number | null;
  budget_lease_coupons: number | null;
  /** Coupons left in this process's own lease, when the issue took from it. */
  own_lease_left: number | null;
}

/**
 * A coupon row `k` as JSON writes IssueResult (its time as Date.prototype.toJSON does), so that a replay reads as the first answer did.
 *
 * @example sql`select ${couponJson('ALREADY_ISSUED', 'k', sql`c.coupons_expire_at`)} from coupons k`
 */
export const couponJson = (status: string, k: string, expiresAt: RawBuilder<Date | null>) =>
  sql`jsonb_build_object('status', ${sql.lit(status)}, 'coupon', jsonb_build_object('id', ${sql.raw(k)}.id, 'campaignId', ${sql.raw(k)}.campaign_id,
    'memberId', ${sql.raw(k)}.member_id, 'month', ${sql.raw(k)}.month, 'amountYen', ${sql.raw(k)}.amount_yen,
    'issuedAt', ${jsonTimeOf(sql`${sql.raw(k)}.issued_at`)}, 'expiresAt', ${jsonTimeOf(expiresAt)}))`;

/** The status columns of a coupon row the statement inserts: nothing holds, redeemed or voided it. */
export const NO_STATUS_COLUMNS = sql.raw(
  'null::timestamptz as redeemed_at, null::timestamptz as voided_at, null::uuid as held_by_order_id',
);

/**
 * The status columns of IssueRow for the coupon row `k` (null when there is none), whose campaign's couponsExpireAt is `expiresAt`.
 *
 * @example sql`select ${foundCouponStatusColumns('k', sql`c.coupons_expire_at`)} from coupons k join campaigns c on …`
 */
export const foundCouponStatusColumns = (k: string, expiresAt: RawBuilder<Date | null>) => {
  const row = sql.raw(k);
  return sql`${row}.redeemed_at, ${row}.voided_at, ${row}.held_by_order_id,
           case when ${row}.id is not null then ${expiredBy(expiresAt)} end as expired`;
};

/**
 * The CTE `guard` (one row, `ok`): the session's lock and statement timeouts are both in force and
 * within the request's (a pooler's older server connection may lack the role's defaults). A
 * statement writes nothing without them and answers AS_TRANSACTION; one issue's and a batch's alike.
 *
 * @example sql`with ${timeoutGuardCte(p)} select ok from guard`
 */
export const timeoutGuardCte = (p: { lockTimeoutMs: unknown; statementTimeoutMs: unknown }) => sql`guard as (
      select current_setting('lock_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.lockTimeoutMs}::int / 1000.0)
         and current_setting('statement_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.statementTimeoutMs}::int / 1000.0)
             as ok
    )`;

/**
 * The whole issue as one statement (docs/design.md §4), the same in both ways it runs: as its own
 * implicit transaction, and inside a transaction when that cannot run (both in issue.ts). The lock order is the Idempotency-Key, the coupon's unique index entry,
 * the member's month row, then one budget row (a slot, the budget row or a lease) last, so the
 * budget row is held only for what is left of the statement and its commit.
 *
 * It first reads, in its snapshot, what it can answer without writing: a missing campaign, a
 * campaign not open at the statement's now() (NOT_STARTED before its start, ENDED from its end on:
 * the database's clock, period.ts), the member's coupon (ALREADY_ISSUED), a month already at the
 * cap, a campaign with no room in any row it may take from (BUDGET_EXCEEDED). A refusal read there writes nothing (with a key, only its
 * claim, committed expired). Otherwise each write is made from the previous one's RETURNING, so a
 * write that finds no room stops the chain, and what the chain wrote is rolled back by a raise:
 * a month that reached the cap meanwhile (coupon_issue_refused, MONTHLY_CAP); a coupon that took
 * no budget because its row went full while the statement waited, which is final for a campaign of
 * one budget row without leases (BUDGET_EXCEEDED) and otherwise a race to run again on a fresh
 * snapshot (coupon_issue_raced, SQLSTATE 40001), like a coupon a double tap committed meanwhile,
 * which the next snapshot shows. Nothing is written unless the session's timeouts are in force
 * (a pooler's older server connection may lack the role's defaults): then it answers AS_TRANSACTION.
 *
 * Built for one shape of campaign (budget.ts), it writes nothing for a campaign of another and
 * answers OTHER_SHAPE; built for `any`, it finds the shape out.
 */
function issueStatement(keyed: boolean, leasing: BudgetLeasing, shape: BuiltFor) {
  const variant = shape === 'any' ? '' : `.${shape === 'one row' ? 'row' : shape}`;
  const name = `coupons.issue.one${variant}${leasing === productLeasing ? '' : `.${leasing.name}`}${keyed ? '+key' : ''}`;
  return prepare<IssueValues & Partial<ClaimValues>, IssueRow>(name, (p) => {
    const rows = { tenantId: p.tenantId, campaignId: p.campaignId, holder: p.leaseHolder, leasing };
    return sql`
    with ${timeoutGuardCte(p)}, campaign as (
      select c.discount_yen, c.budget_slots, c.budget_lease_coupons, c.coupons_expire_at, t.monthly_cap_yen,
             ${periodRefusal('c', ISSUE_TIME)} as period_refusal, ${monthOf(ISSUE_TIME, p.timeZone)} as month,
             ${campaignHasRoom(rows, sql`c.discount_yen`, shape)} as has_room
        from campaigns c join tenants t on t.id = c.tenant_id
       where c.tenant_id = ${p.tenantId} and c.id = ${p.campaignId}
    ), seen as (
      select id, campaign_id, member_id, month, amount_yen, issued_at, redeemed_at, voided_at, held_by_order_id from coupons
       where tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and member_id = ${p.memberId} and not legacy_duplicate
    ), facts as (
      -- What this statement's snapshot answers, before it writes anything.
      select g.ok, c.discount_yen, c.budget_slots, c.budget_lease_coupons, c.coupons_expire_at, c.month,
             case
               when c.discount_yen is null then 'NOT_FOUND'
               ${shape === 'any' ? sql`` : sql`when not ${hasShape('c', shape)} then 'OTHER_SHAPE'`}
               when c.period_refusal is not null then c.period_refusal
               when exists (select 1 from seen) then 'ALREADY_ISSUED'
               when coalesce((select u.used_yen from member_monthly_usage u
                               where u.tenant_id = ${p.tenantId} and u.member_id = ${p.memberId} and u.month = c.month), 0)
                    + c.discount_yen > c.monthly_cap_yen then 'MONTHLY_CAP'
               when not c.has_room then 'BUDGET_EXCEEDED'
               else 'ISSUE'
             end as outcome
        from guard g left join campaign c on true
    ), ${
      keyed
        ? sql`${claimCte(p, {
            from: sql`facts f`,
            when: shape === 'any' ? sql`f.ok` : sql`f.ok and f.outcome <> 'OTHER_SHAPE'`,
            // The answer this statement keeps when it commits. A refusal it read commits its claim
            // expired; every other ending raises and rolls back.
            response: sql`case f.outcome
              when 'ISSUE' then jsonb_build_object('status', 'ISSUED', 'coupon', jsonb_build_object('id', ${p.couponId}::text,
                'campaignId', ${p.campaignId}::text, 'memberId', ${p.memberId}::text, 'month', f.month,
                'amountYen', f.discount_yen, 'issuedAt', ${jsonTimeOf(ISSUE_TIME)}, 'expiresAt', ${jsonTimeOf(sql`f.coupons_expire_at`)}))
              when 'ALREADY_ISSUED' then (select ${couponJson('ALREADY_ISSUED', 'k', sql`f.coupons_expire_at`)} from seen k) end`,
            kept: sql`f.outcome in ('ISSUE', 'ALREADY_ISSUED')`,
          })}, `
        : sql``
    }decision as (
      select case
               when not f.ok then 'AS_TRANSACTION'
               ${keyed ? sql`when not exists (select 1 from claim) then 'KEY_HELD'` : sql``}
               else f.outcome
             end as outcome, f.discount_yen, f.budget_slots, f.budget_lease_coupons, f.coupons_expire_at, f.month
        from facts f
    ), inserted as (
      insert into coupons (tenant_id, id, campaign_id, member_id, month, amount_yen, issued_at)
      select ${p.tenantId}, ${p.couponId}::uuid, ${p.campaignId}, ${p.memberId}, month, discount_yen, ${ISSUE_TIME} from decision where outcome = 'ISSUE'
      on conflict (tenant_id, campaign_id, member_id) where not legacy_duplicate do nothing
      returning id, campaign_id, member_id, month, amount_yen, issued_at
    ), usage as (
      insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
      select ${p.tenantId}, ${p.memberId}, month, amount_yen from inserted
      on conflict (tenant_id, member_id, month) do update
        set used_yen = member_monthly_usage.used_yen + excluded.used_yen
        where member_monthly_usage.used_yen + excluded.used_yen
              <= (select monthly_cap_yen from tenants where id = excluded.tenant_id)
      returning used_yen
    ), ask as (
      -- What the budget must pay, once the month row was written; nothing is looked at before.
      select i.amount_yen, d.budget_slots, d.budget_lease_coupons from inserted i, decision d where exists (select 1 from usage)
    ), ${takeBudgetCtes(rows, 'ask', p.spread, shape)}, event as (
      insert into outbox_events (tenant_id, topic, payload, traceparent)
      select ${p.tenantId}, ${COUPON_ISSUED_TOPIC},
             jsonb_build_object('id', i.id, 'campaignId', i.campaign_id, 'memberId', i.member_id, 'month', i.month,
                                'amountYen', i.amount_yen, 'issuedAt', ${jsonTimeOf(sql`i.issued_at`)}, 'tenantId', ${p.tenantId}::text),
             ${p.traceparent}::text
        from inserted i where exists (select 1 from taken)
    ), coupon as (
      select id, campaign_id, member_id, month, amount_yen, issued_at, ${NO_STATUS_COLUMNS} from inserted where exists (select 1 from taken)
      union all
      select id, campaign_id, member_id, month, amount_yen, issued_at, redeemed_at, voided_at, held_by_order_id
        from seen where (select outcome from decision) = 'ALREADY_ISSUED'
    ), audit_row as (
      insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
      select ${p.auditTenantId}, ${p.actorUserId}, ${p.role}, ${p.operation}, array[k.id::text, k.campaign_id], ${p.requestId} from coupon k
    )
    select d.outcome, k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at,
           case when k.id is not null then d.coupons_expire_at end as expires_at, ${foundCouponStatusColumns('k', sql`d.coupons_expire_at`)},
           d.budget_slots, d.budget_lease_coupons, (select own_lease_left from taken) as own_lease_left,
           case
             when d.outcome = 'ISSUE' and not exists (select 1 from inserted) then coupon_issue_raced()
             when exists (select 1 from inserted) and not exists (select 1 from usage) then coupon_issue_refused('MONTHLY_CAP')
             -- Never a coupon without its budget: a row that went full while this waited took nothing.
             when exists (select 1 from inserted) and not exists (select 1 from taken) then
               case when ${tookNothingIsFinal('ask', shape)} then coupon_issue_refused('BUDGET_EXCEEDED') else coupon_issue_raced() end
           end as refused${
             keyed
               ? // A refusal's expired claim changes no answer if a crash or a failover loses it (the key
                 // runs afresh either way), so its commit does not wait for the WAL flush or a standby.
                 sql`,
           case when d.outcome in (${snapshotRefusals})
                then set_config('synchronous_commit', 'off', true) end as commit_unflushed`
               : sql``
           }
      from decision d left join coupon k on true`;
  });
}

/** The issue's statements for one way of taking from leases: per shape built for, without and with an Idempotency-Key. */
export type IssueStatements = Record<BuiltFor, { plain: ReturnType<typeof issueStatement>; keyed: ReturnType<typeof issueStatement> }>;
const BUILT_FOR: BuiltFor[] = ['any', 'one row', 'slots', 'leases'];
const statementsByLeasing = new Map<BudgetLeasing, IssueStatements>();
/**
 * The issue's statements for `leasing`, prepared once per process.
 *
 * @example statementsFor(leases.leasing).slots.plain.execute(db, values)
 */
export const statementsFor = (leasing: BudgetLeasing): IssueStatements => {
  let statements = statementsByLeasing.get(leasing);
  if (!statements) {
    const built = BUILT_FOR.map((shape) => [
      shape,
      { plain: issueStatement(false, leasing, shape), keyed: issueStatement(true, leasing, shape) },
    ]);
    statements = Object.fromEntries(built) as IssueStatements;
    statementsByLeasing.set(leasing, statements);
  }
  return statements;
};
statementsFor(productLeasing);
