import { sql, type Kysely } from 'kysely';
import { prepare, type Slots } from '../db/prepared.js';
import type { DB } from '../db/schema.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { hasShape, takeBudgetCtes, type CampaignShape } from './budget.js';
import { COUPON_ISSUED_TOPIC } from './issue.js';
import { couponJson, type IssueRow, type IssueValues, type Outcome } from './issue-statement.js';

/** The shapes a batch is built for: a campaign whose budget is taken from one slot row at a time. Leases stay one issue a statement. */
export type BatchShape = Extract<CampaignShape, 'one row' | 'slots'>;

export const isBatchShape = (shape: CampaignShape | undefined): shape is BatchShape => shape === 'one row' || shape === 'slots';

/** One member of a batch: its issue's values, and its claim when it has an Idempotency-Key. */
export interface BatchMember {
  values: IssueValues;
  claim: ClaimValues | null;
}

/** What a member's row may answer besides one issue's: ALONE, it was not decided here and runs again in a statement of its own. */
export type MemberOutcome = Outcome | 'ALONE';

export interface MemberRow extends Omit<IssueRow, 'outcome'> {
  /** The member's place in the batch, from 1. */
  n: string;
  outcome: MemberOutcome;
}

/** The batch's values: the campaign's, and one array per member value (nulls where a member lacks it), all in member order. */
interface BatchValues {
  tenantId: string;
  campaignId: string;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  leaseHolder: string;
  spread: number;
  memberIds: string[];
  months: string[];
  couponIds: string[];
  issuedAts: string[];
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
 * Many members' issues on one campaign as one statement and one commit (docs/design.md §4,
 * "Batched issues"). Each member's outcome is decided on its own, as conditions and never as a
 * raised error, so that no member's refusal, double tap or key stops another's coupon:
 *
 * - the snapshot answers what it can for each member, as one issue's statement does: a missing
 *   campaign, the member's coupon (ALREADY_ISSUED), a month at the cap, a campaign whose slots all
 *   lack room (BUDGET_EXCEEDED). The rest would issue: as many as the slot with most room can pay
 *   for, in member order; the others are ALONE (another slot may pay for them, in a statement of
 *   their own);
 * - a member's claim (with a key) is written next, with the answer it keeps; a key another request
 *   holds makes that member KEY_HELD and writes nothing else of it;
 * - then each member's coupon, its month row, and the budget taken ONCE for all of them: one slot
 *   row locked (one nobody holds first, from `spread`) and its issued yen raised by every coupon's
 *   amount. A coupon a double tap committed meanwhile is not inserted: that member writes nothing
 *   and runs ALONE, where the next snapshot shows its coupon;
 * - the outbox event and the audit row of each coupon.
 *
 * Each lock is taken phase by phase (claims, coupon entries, month rows, in member order; the slot
 * last), the order one issue's statement takes them in, so a batch and single issues never wait
 * for each other in a circle. What a member's later write refuses after its earlier one was
 * written cannot be taken back inside one statement: a month row that reached the cap meanwhile,
 * a slot that went full while the batch waited for it, a keyed member's coupon a double tap
 * committed (its claim already keeps an ISSUED answer). Those fail the batch whole with SQLSTATE
 * 40001, nothing of it kept, and its members run again alone (coalescer.ts).
 */
function batchStatement(keyed: boolean, shape: BatchShape) {
  const name = `coupons.issue.batch.${shape === 'one row' ? 'row' : shape}${keyed ? '+key' : ''}`;
  return prepare<BatchValues, MemberRow>(name, (p) => {
    const rows = { tenantId: p.tenantId, campaignId: p.campaignId, holder: p.leaseHolder, leasing: ALL_LEASES };
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
    with guard as (
      select current_setting('lock_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.lockTimeoutMs}::int / 1000.0)
         and current_setting('statement_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.statementTimeoutMs}::int / 1000.0)
             as ok
    ), campaign as (
      select c.discount_yen, c.budget_slots, c.budget_lease_coupons, t.monthly_cap_yen
        from campaigns c join tenants t on t.id = c.tenant_id
       where c.tenant_id = ${p.tenantId} and c.id = ${p.campaignId}
    ), room as (
      -- Whole coupons of room in the snapshot (slotHasRoom for k coupons): in all slots, and in the one with most.
      select coalesce(sum(r.coupons), 0) as total, coalesce(max(r.coupons), 0) as most
        from (select greatest((s.budget_yen - s.issued_yen - s.leased_yen) / c.discount_yen, 0) as coupons
                from campaign_budget_slots s, campaign c
               where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId}) r
    ), member as (
      select * from unnest(${p.memberIds}::text[], ${p.months}::text[], ${p.couponIds}::uuid[], ${p.issuedAts}::timestamptz[],
                           ${p.issuedAts}::text[], ${p.traceparents}::text[], ${p.auditTenantIds}::text[], ${p.actorUserIds}::text[],
                           ${p.roles}::text[], ${p.operations}::text[], ${p.requestIds}::text[], ${p.keyTenantIds}::text[],
                           ${p.keyUserIds}::text[], ${p.keyRoles}::text[], ${p.keys}::text[], ${p.fingerprints}::text[],
                           ${p.keyOperations}::text[], ${p.ttlHours}::int[])
               with ordinality as m(member_id, month, coupon_id, issued_at, issued_at_text, traceparent, audit_tenant_id, actor_user_id,
                                    role, operation, request_id, key_tenant_id, key_user_id, key_role, key, fingerprint,
                                    key_operation, ttl_hours, n)
    ), seen as (
      select id, campaign_id, member_id, month, amount_yen, issued_at from coupons
       where tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and member_id = any (${p.memberIds}::text[]) and not legacy_duplicate
    ), facts as (
      -- What this statement's snapshot answers for each member, before it writes anything.
      select m.*, g.ok, c.discount_yen, c.budget_slots, c.budget_lease_coupons,
             case
               when c.discount_yen is null then 'NOT_FOUND'
               when not ${hasShape('c', shape)} then 'OTHER_SHAPE'
               when exists (select 1 from seen s where s.member_id = m.member_id) then 'ALREADY_ISSUED'
               when coalesce((select u.used_yen from member_monthly_usage u
                               where u.tenant_id = ${p.tenantId} and u.member_id = m.member_id and u.month = m.month), 0)
                    + c.discount_yen > c.monthly_cap_yen then 'MONTHLY_CAP'
               when (select total from room) = 0 then 'BUDGET_EXCEEDED'
               else 'ISSUE'
             end as read_outcome
        from member m cross join guard g left join campaign c on true
    ), decided as (
      -- The budget is taken once, from one slot: members past what the slot with most room pays for run alone.
      select f.*,
             case when f.read_outcome = 'ISSUE'
                   and count(*) filter (where f.read_outcome = 'ISSUE') over (order by f.n) > (select most from room) then 'ALONE'
                  else f.read_outcome end as outcome
        from facts f
    ), ${
      keyed
        ? sql`${claimCte(memberClaim, {
            from: sql`(select * from decided order by member_id) d`,
            when: sql`d.ok and d.key is not null and d.outcome not in ('OTHER_SHAPE', 'ALONE')`,
            response: sql`case d.outcome
              when 'ISSUE' then jsonb_build_object('status', 'ISSUED', 'coupon', jsonb_build_object('id', d.coupon_id::text,
                'campaignId', ${p.campaignId}::text, 'memberId', d.member_id, 'month', d.month,
                'amountYen', d.discount_yen, 'issuedAt', d.issued_at_text))
              when 'ALREADY_ISSUED' then (select ${couponJson('ALREADY_ISSUED', 'k')} from seen k where k.member_id = d.member_id) end`,
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
      select ${p.tenantId}, d.coupon_id, ${p.campaignId}, d.member_id, d.month, d.discount_yen, d.issued_at
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
      -- What the budget must pay for every coupon whose month row was written: taken from one slot at once.
      select (count(*) * c.discount_yen)::int as amount_yen, c.budget_slots, c.budget_lease_coupons
        from usage u, campaign c group by c.discount_yen, c.budget_slots, c.budget_lease_coupons
    ), ${takeBudgetCtes(rows, 'ask', p.spread, shape)}, event as (
      insert into outbox_events (tenant_id, topic, payload, traceparent)
      select ${p.tenantId}, ${COUPON_ISSUED_TOPIC},
             jsonb_build_object('id', i.id, 'campaignId', i.campaign_id, 'memberId', i.member_id, 'month', i.month,
                                'amountYen', i.amount_yen, 'issuedAt', d.issued_at_text, 'tenantId', ${p.tenantId}::text),
             d.traceparent
        from inserted i join decision d on d.member_id = i.member_id where exists (select 1 from taken)
    ), coupon as (
      select id, campaign_id, member_id, month, amount_yen, issued_at from inserted where exists (select 1 from taken)
      union all
      select s.id, s.campaign_id, s.member_id, s.month, s.amount_yen, s.issued_at
        from seen s join decision d on d.member_id = s.member_id where d.final = 'ALREADY_ISSUED'
    ), audit_row as (
      insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
      select d.audit_tenant_id, d.actor_user_id, d.role, d.operation, array[k.id::text, k.campaign_id], d.request_id
        from coupon k join decision d on d.member_id = k.member_id
    ), verdict as (
      -- A member's write refused after its earlier one was written: nothing of the batch may stay.
      select case
               when (select count(*) from usage) <> (select count(*) from inserted)
                 or (exists (select 1 from usage) and not exists (select 1 from taken))
                 ${keyed ? sql`or exists (select 1 from decision d where d.final = 'ISSUE' and d.key is not null and d.member_id not in (select member_id from inserted))` : sql``}
               then coupon_issue_raced()
             end as raced
    )
    select d.n::text as n, case when d.final = 'ISSUE' and k.id is null then 'ALONE' else d.final end as outcome,
           k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at, d.budget_slots, d.budget_lease_coupons,
           null::int as own_lease_left, (select raced from verdict) as raced${
             keyed
               ? // As one issue's statement: a batch that kept no answer (every member refused) need not wait for the WAL flush.
                 sql`,
           case when not exists (select 1 from decision where final in ('ISSUE', 'ALREADY_ISSUED'))
                then set_config('synchronous_commit', 'off', true) end as commit_unflushed`
               : sql``
           }
      from decision d left join coupon k on k.member_id = d.member_id
     order by d.n`;
  });
}

/**
 * True, once every row of the CTE `name` was written: an uncorrelated subquery runs once, to the
 * end, before the first row of the CTE that asks it, so one phase's locks are all taken before the
 * next phase's first (a CTE read row by row would interleave them, member by member).
 */
const everyRowOf = (name: string) => sql`(select count(*) from ${sql.raw(name)}) >= 0`;

/** A batch takes from no lease (campaigns with leases are not batched); the slot CTEs need a leasing all the same. */
const ALL_LEASES = { name: 'none', mayTake: () => sql`false`, givenBack: () => sql`false` };

const statements = {
  'one row': { plain: batchStatement(false, 'one row'), keyed: batchStatement(true, 'one row') },
  slots: { plain: batchStatement(false, 'slots'), keyed: batchStatement(true, 'slots') },
};

/**
 * Runs the batch's statement on `db` (one connection, outside any transaction block): its rows in
 * member order, one for each member. Throws what the statement raised (SQLSTATE 40001 when it
 * failed whole, see batchStatement), having kept nothing.
 */
export async function runBatch(db: Kysely<DB>, shape: BatchShape, members: BatchMember[]): Promise<MemberRow[]> {
  const first = members[0]!.values;
  const keyed = members.some((m) => m.claim !== null);
  const column = <T>(of: (m: BatchMember) => T) => members.map(of);
  const values: BatchValues = {
    tenantId: first.tenantId,
    campaignId: first.campaignId,
    lockTimeoutMs: first.lockTimeoutMs,
    statementTimeoutMs: first.statementTimeoutMs,
    leaseHolder: first.leaseHolder,
    spread: first.spread,
    memberIds: column((m) => m.values.memberId),
    months: column((m) => m.values.month),
    couponIds: column((m) => m.values.couponId),
    issuedAts: column((m) => m.values.issuedAt),
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
  const statement = keyed ? statements[shape].keyed : statements[shape].plain;
  return (await statement.execute(db, values)).rows;
}
