import { sql, type Kysely } from 'kysely';
import { prepare, type Slots } from '../../db/prepared.js';
import type { DB } from '../../db/schema.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { hasShape, slotHasRoom, type CampaignShape } from './budget.js';
import { ISSUE_TIME, jsonTimeOf, monthOf, periodRefusal } from './period.js';
import {
  COUPON_ISSUED_TOPIC,
  couponJson,
  foundCouponStatusColumns,
  NO_STATUS_COLUMNS,
  timeoutGuardCte,
  type IssueRow,
  type IssueValues,
  type Outcome,
} from './issue-statement.js';

/**
 * The shapes a batch is built for: a campaign whose budget is slot rows, one or several, taken one
 * row at a time. Campaigns of both shapes may meet in one batch; leases stay one issue a statement.
 */
export type BatchShape = Extract<CampaignShape, 'one row' | 'slots'>;

/**
 * Whether a campaign of this shape may be issued on in a batch: its budget is slot rows (one or several).
 *
 * @example isBatchShape(shapes.get(tenantId, campaignId)) // true for one row or slots
 */
export const isBatchShape = (shape: CampaignShape | undefined): shape is BatchShape => shape === 'one row' || shape === 'slots';

/** One member of a batch: its issue's values (its campaign among them), and its claim when it has an Idempotency-Key. */
export interface BatchMember {
  values: IssueValues;
  claim: ClaimValues | null;
}

/** What a member's row may answer besides one issue's: ALONE, it was not decided here and runs again in a statement of its own. */
type MemberOutcome = Outcome | 'ALONE';

export interface MemberRow extends Omit<IssueRow, 'outcome'> {
  /** The member's place in the batch, from 1. */
  n: string;
  outcome: MemberOutcome;
}

/** The batch's values: the campaign's, and one array per member value (nulls where a member lacks it), all in member order. */
interface BatchValues {
  tenantId: string;
  /** Each member's campaign: a batch may carry several campaigns of its tenant. */
  campaignIds: string[];
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  spread: number;
  /** Of business months: every member's coupon counts in the month of the statement's now() there. */
  timeZone: string;
  memberIds: string[];
  couponIds: string[];
  traceparents: (string | null)[];
  auditTenantIds: string[];
  actorUserIds: (string | null)[];
  roles: string[];
  operations: string[];
  requestIds: string[];
  keyTenantIds: (string | null)[];
  keyUserIds: (string | null)[];
  keyRoles: (string | null)[];
  keys: (string | null)[];
  fingerprints: (string | null)[];
  keyOperations: (string | null)[];
  ttlHours: (number | null)[];
}

/**
 * Many members' issues, on one or several campaigns of one tenant, as one statement and one commit
 * (docs/design.md §4, "Batched issues"). Each member's outcome is decided on its own, as conditions
 * and never as a raised error, so that no member's refusal, double tap or key stops another's
 * coupon:
 *
 * - the snapshot answers what it can for each member, as one issue's statement does: a missing
 *   campaign, a campaign not open at the statement's now() (NOT_STARTED, ENDED), the member's coupon (ALREADY_ISSUED), a month at the cap, a campaign whose slots all
 *   lack room (BUDGET_EXCEEDED). The rest would issue: per campaign, as many as its slot with most
 *   room can pay for, in member order; the others are ALONE (another slot may pay for them, in a
 *   statement of their own);
 * - a member's claim (with a key) is written next, with the answer it keeps; a key another request
 *   holds makes that member KEY_HELD and writes nothing else of it;
 * - then each member's coupon, its month row, and the budget taken ONCE per campaign for all of
 *   its members: one slot row of each campaign locked (one nobody holds first, from `spread`) and
 *   its issued yen raised by every coupon's amount. A coupon a double tap committed meanwhile is
 *   not inserted: that member writes nothing and runs ALONE, where the next snapshot shows it;
 * - the outbox event and the audit row of each coupon.
 *
 * Each lock is taken phase by phase (claims, coupon entries, month rows, in member order; then the
 * slots, one per campaign, in campaign id order), the order one issue's statement takes them in,
 * so a batch and single issues never wait for each other in a circle. What a member's later write
 * refuses after its earlier one was written cannot be taken back inside one statement: a month row
 * that reached the cap meanwhile, a slot that went full while the batch waited for it, a keyed
 * member's coupon a double tap committed (its claim already keeps an ISSUED answer). Those fail
 * the batch whole with SQLSTATE 40001, nothing of it kept, and its members run again alone
 * (coalescer.ts). A member is in a batch at most once (its month row is written once a statement).
 */
function batchStatement(keyed: boolean) {
  const name = `coupons.issue.batch${keyed ? '+key' : ''}`;
  return prepare<BatchValues, MemberRow>(name, (p) => {
    // The claim CTE is one issue's, reading each member's key from its decided row.
    const memberClaim = {
      keyTenantId: sql`d.key_tenant_id`,
      keyUserId: sql`d.key_user_id`,
      keyRole: sql`d.key_role`,
      key: sql`d.key`,
      fingerprint: sql`d.fingerprint`,
      operation: sql`d.key_operation`,
      ttlHours: sql`d.ttl_hours`,
    } as unknown as Slots<ClaimValues>;
    return sql`
    with ${timeoutGuardCte(p)}, campaign as (
      select c.id as campaign_id, c.discount_yen, c.budget_slots, c.budget_lease_coupons, c.coupons_expire_at, t.monthly_cap_yen,
             ${periodRefusal('c', ISSUE_TIME)} as period_refusal, ${monthOf(ISSUE_TIME, p.timeZone)} as month
        from campaigns c join tenants t on t.id = c.tenant_id
       where c.tenant_id = ${p.tenantId} and c.id = any (${p.campaignIds}::text[])
    ), room as (
      -- Per campaign, whole coupons of room in the snapshot (slotHasRoom for k coupons): in all its slots, and in the one with most.
      select s.campaign_id, sum(greatest((s.budget_yen - s.issued_yen - s.leased_yen) / c.discount_yen, 0)) as total,
             max(greatest((s.budget_yen - s.issued_yen - s.leased_yen) / c.discount_yen, 0)) as most
        from campaign_budget_slots s join campaign c on c.campaign_id = s.campaign_id
       where s.tenant_id = ${p.tenantId} and s.campaign_id = any (${p.campaignIds}::text[])
       group by s.campaign_id
    ), member as (
      select * from unnest(${p.campaignIds}::text[], ${p.memberIds}::text[], ${p.couponIds}::uuid[],
                           ${p.traceparents}::text[], ${p.auditTenantIds}::text[],
                           ${p.actorUserIds}::text[], ${p.roles}::text[], ${p.operations}::text[], ${p.requestIds}::text[],
                           ${p.keyTenantIds}::text[], ${p.keyUserIds}::text[], ${p.keyRoles}::text[], ${p.keys}::text[],
                           ${p.fingerprints}::text[], ${p.keyOperations}::text[], ${p.ttlHours}::int[])
               with ordinality as m(campaign_id, member_id, coupon_id, traceparent, audit_tenant_id,
                                    actor_user_id, role, operation, request_id, key_tenant_id, key_user_id, key_role, key, fingerprint,
                                    key_operation, ttl_hours, n)
    ), seen as (
      select k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at, k.redeemed_at, k.voided_at, k.held_by_order_id from coupons k
       where k.tenant_id = ${p.tenantId} and k.campaign_id = any (${p.campaignIds}::text[]) and k.member_id = any (${p.memberIds}::text[])
         and not k.legacy_duplicate and (k.campaign_id, k.member_id) in (select campaign_id, member_id from member)
    ), facts as (
      -- What this statement's snapshot answers for each member, before it writes anything.
      select m.*, g.ok, c.discount_yen, c.budget_slots, c.budget_lease_coupons, c.coupons_expire_at, c.month, coalesce(r.most, 0) as most,
             case
               when c.discount_yen is null then 'NOT_FOUND'
               when ${hasShape('c', 'leases')} then 'OTHER_SHAPE'
               when c.period_refusal is not null then c.period_refusal
               when exists (select 1 from seen s where s.campaign_id = m.campaign_id and s.member_id = m.member_id) then 'ALREADY_ISSUED'
               when coalesce((select u.used_yen from member_monthly_usage u
                               where u.tenant_id = ${p.tenantId} and u.member_id = m.member_id and u.month = c.month), 0)
                    + c.discount_yen > c.monthly_cap_yen then 'MONTHLY_CAP'
               when coalesce(r.total, 0) = 0 then 'BUDGET_EXCEEDED'
               else 'ISSUE'
             end as read_outcome
        from member m cross join guard g left join campaign c on c.campaign_id = m.campaign_id
             left join room r on r.campaign_id = m.campaign_id
    ), decided as (
      -- Each campaign's budget is taken once, from one slot: its members past what the slot with most room pays for run alone.
      select f.*,
             case when f.read_outcome = 'ISSUE'
                   and count(*) filter (where f.read_outcome = 'ISSUE') over (partition by f.campaign_id order by f.n) > f.most then 'ALONE'
                  else f.read_outcome end as outcome
        from facts f
    ), ${
      keyed
        ? sql`${claimCte(memberClaim, {
            from: sql`(select * from decided order by member_id) d`,
            when: sql`d.ok and d.key is not null and d.outcome not in ('OTHER_SHAPE', 'ALONE')`,
            response: sql`case d.outcome
              when 'ISSUE' then jsonb_build_object('status', 'ISSUED', 'coupon', jsonb_build_object('id', d.coupon_id::text,
                'campaignId', d.campaign_id, 'memberId', d.member_id, 'month', d.month,
                'amountYen', d.discount_yen, 'issuedAt', ${jsonTimeOf(ISSUE_TIME)}, 'expiresAt', ${jsonTimeOf(sql`d.coupons_expire_at`)}))
              when 'ALREADY_ISSUED' then (select ${couponJson('ALREADY_ISSUED', 'k', sql`d.coupons_expire_at`)} from seen k
                                           where k.campaign_id = d.campaign_id and k.member_id = d.member_id) end`,
            kept: sql`d.outcome in ('ISSUE', 'ALREADY_ISSUED')`,
          })}, `
        : sql``
    }decision as (
      select d.*,
             case
               when not d.ok then 'AS_TRANSACTION'
               ${
                 keyed
                   ? sql`when d.key is not null and d.outcome not in ('OTHER_SHAPE', 'ALONE')
                          and (d.key_user_id, d.key_role, d.key) not in (select user_id, role, key from claim) then 'KEY_HELD'`
                   : sql``
               }
               else d.outcome
             end as final
        from decided d
    ), inserted as (
      insert into coupons (tenant_id, id, campaign_id, member_id, month, amount_yen, issued_at)
      select ${p.tenantId}, d.coupon_id, d.campaign_id, d.member_id, d.month, d.discount_yen, ${ISSUE_TIME}
        from decision d where d.final = 'ISSUE'${keyed ? sql` and ${everyRowOf('claim')}` : sql``} order by d.member_id
      on conflict (tenant_id, campaign_id, member_id) where not legacy_duplicate do nothing
      returning id, campaign_id, member_id, month, amount_yen, issued_at
    ), usage as (
      insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
      select ${p.tenantId}, i.member_id, i.month, i.amount_yen from inserted i where ${everyRowOf('inserted')} order by i.member_id
      on conflict (tenant_id, member_id, month) do update
        set used_yen = member_monthly_usage.used_yen + excluded.used_yen
        where member_monthly_usage.used_yen + excluded.used_yen
              <= (select monthly_cap_yen from tenants where id = excluded.tenant_id)
      returning member_id
    ), ask as (
      -- What each campaign's budget must pay for its coupons whose month row was written: taken from one of its slots at once.
      select i.campaign_id, sum(i.amount_yen)::int as amount_yen, c.budget_slots
        from usage u join inserted i on i.member_id = u.member_id join campaign c on c.campaign_id = i.campaign_id
       group by i.campaign_id, c.budget_slots
    ), picked as (
      -- One slot per campaign, in campaign id order: one nobody holds, from spread on; else one with room in the snapshot,
      -- waited for. The lock's recheck asks only for the row's key and the snapshot's candidates, never for its room,
      -- which is read from the row's newest version once it is locked (see takeBudgetCtes, budget.ts).
      select a.campaign_id, a.amount_yen, k.slot, k.has_room
        from (select * from ask order by campaign_id) a
             cross join lateral (
               -- The second (waiting) lock runs only when the first found no slot nobody holds: a limit stops an append.
               select * from (${lockedSlot(true)}) free union all select * from (${lockedSlot(false)}) waited limit 1) k
    ), slotted as (
      update campaign_budget_slots s set issued_yen = s.issued_yen + k.amount_yen
        from picked k
       where s.tenant_id = ${p.tenantId} and s.campaign_id = k.campaign_id and s.slot = k.slot and k.has_room
      returning s.campaign_id
    ), event as (
      insert into outbox_events (tenant_id, topic, payload, traceparent)
      select ${p.tenantId}, ${COUPON_ISSUED_TOPIC},
             jsonb_build_object('id', i.id, 'campaignId', i.campaign_id, 'memberId', i.member_id, 'month', i.month,
                                'amountYen', i.amount_yen, 'issuedAt', ${jsonTimeOf(sql`i.issued_at`)}, 'tenantId', ${p.tenantId}::text),
             d.traceparent
        from inserted i join decision d on d.member_id = i.member_id where i.campaign_id in (select campaign_id from slotted)
    ), coupon as (
      select id, campaign_id, member_id, month, amount_yen, issued_at, ${NO_STATUS_COLUMNS}
        from inserted where campaign_id in (select campaign_id from slotted)
      union all
      select s.id, s.campaign_id, s.member_id, s.month, s.amount_yen, s.issued_at, s.redeemed_at, s.voided_at, s.held_by_order_id
        from seen s join decision d on d.campaign_id = s.campaign_id and d.member_id = s.member_id where d.final = 'ALREADY_ISSUED'
    ), audit_row as (
      insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
      select d.audit_tenant_id, d.actor_user_id, d.role, d.operation, array[k.id::text, k.campaign_id], d.request_id
        from coupon k join decision d on d.member_id = k.member_id
    ), verdict as (
      -- A member's write refused after its earlier one was written: nothing of the batch may stay.
      select case
               when (select count(*) from usage) <> (select count(*) from inserted)
                 or (select count(*) from slotted) <> (select count(*) from ask)
                 ${keyed ? sql`or exists (select 1 from decision d where d.final = 'ISSUE' and d.key is not null and d.member_id not in (select member_id from inserted))` : sql``}
               then coupon_issue_raced()
             end as raced
    )
    select d.n::text as n, case when d.final = 'ISSUE' and k.id is null then 'ALONE' else d.final end as outcome,
           k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at,
           case when k.id is not null then d.coupons_expire_at end as expires_at, ${foundCouponStatusColumns('k', sql`d.coupons_expire_at`)},
           d.budget_slots, d.budget_lease_coupons, null::int as own_lease_left, (select raced from verdict) as raced${
             keyed
               ? // As one issue's statement: a batch that kept no answer (every member refused) need not wait for the WAL flush.
                 sql`,
           case when not exists (select 1 from decision where final in ('ISSUE', 'ALREADY_ISSUED'))
                then set_config('synchronous_commit', 'off', true) end as commit_unflushed`
               : sql``
           }
      from decision d left join coupon k on k.member_id = d.member_id
     order by d.n`;

    /** One slot of the campaign `a` that had room for its amount in the snapshot, locked: one nobody holds, or one waited for. */
    function lockedSlot(nobodyHolds: boolean) {
      return sql`select s.slot, ${slotHasRoom('s', sql`a.amount_yen`)} as has_room from campaign_budget_slots s
                  where ${slotCandidate('s')} order by (s.slot + ${p.spread}::int) % a.budget_slots limit 1
                    for update of s${sql.raw(nobodyHolds ? ' skip locked' : '')}`;
    }

    /** Slot row `alias` is one of the campaign `a`'s slots that had room for its amount in the snapshot. */
    function slotCandidate(alias: string) {
      const s = sql.raw(alias);
      return sql`${s}.tenant_id = ${p.tenantId} and ${s}.campaign_id = a.campaign_id
                 and ${s}.slot = any (array(select r.slot from campaign_budget_slots r
                                             where r.tenant_id = ${p.tenantId} and r.campaign_id = a.campaign_id
                                               and ${slotHasRoom('r', sql`a.amount_yen`)}))`;
    }
  });
}

/**
 * True, once every row of the CTE `name` was written: an uncorrelated subquery runs once, to the
 * end, before the first row of the CTE that asks it, so one phase's locks are all taken before the
 * next phase's first (a CTE read row by row would interleave them, member by member).
 */
const everyRowOf = (name: string) => sql`(select count(*) from ${sql.raw(name)}) >= 0`;

const statements = { plain: batchStatement(false), keyed: batchStatement(true) };

/**
 * Runs the batch's statement on `db` (one connection, outside any transaction block): its rows in
 * member order, one for each member. The members are of one tenant and at most once each; their
 * campaigns may differ. Throws what the statement raised (SQLSTATE 40001 when it failed whole, see
 * batchStatement), having kept nothing.
 *
 * @example const rows = await runBatch(db, members)
 */
export async function runBatch(db: Kysely<DB>, members: BatchMember[]): Promise<MemberRow[]> {
  const first = members[0]!.values;
  const keyed = members.some((m) => m.claim !== null);
  const column = <T>(of: (m: BatchMember) => T) => members.map(of);
  const values: BatchValues = {
    tenantId: first.tenantId,
    campaignIds: column((m) => m.values.campaignId),
    lockTimeoutMs: first.lockTimeoutMs,
    statementTimeoutMs: first.statementTimeoutMs,
    spread: first.spread,
    timeZone: first.timeZone,
    memberIds: column((m) => m.values.memberId),
    couponIds: column((m) => m.values.couponId),
    traceparents: column((m) => m.values.traceparent),
    auditTenantIds: column((m) => m.values.auditTenantId),
    actorUserIds: column((m) => m.values.actorUserId),
    roles: column((m) => m.values.role),
    operations: column((m) => m.values.operation),
    requestIds: column((m) => m.values.requestId),
    keyTenantIds: column((m) => m.claim?.keyTenantId ?? null),
    keyUserIds: column((m) => m.claim?.keyUserId ?? null),
    keyRoles: column((m) => m.claim?.keyRole ?? null),
    keys: column((m) => m.claim?.key ?? null),
    fingerprints: column((m) => m.claim?.fingerprint ?? null),
    keyOperations: column((m) => m.claim?.operation ?? null),
    ttlHours: column((m) => m.claim?.ttlHours ?? null),
  };
  return (await (keyed ? statements.keyed : statements.plain).execute(db, values)).rows;
}
