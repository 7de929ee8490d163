import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { FinishBase, Bookkeeping } from '../bookkeeping/bookkeeping.js';
import { prepare } from '../../db/prepared.js';
import type { DB } from '../../db/schema.js';
import { SqlState, sqlStateOf } from '../../db/sqlstate.js';
import { AS_TRANSACTION, RollbackAndReturn, type PinConnection, type TransactionSettings } from '../../db/transaction.js';
import { notFound } from '../../core/errors.js';
import { traceparentOf, tracing } from '../../core/tracing.js';
import { claimCte, type ClaimValues } from '../idempotency/service.js';
import { campaignHasRoom, hasShape, shapeOf, takeBudgetCtes, tookNothingIsFinal, type BuiltFor, type CampaignShape } from './budget.js';
import { MAX_BUDGET_SLOTS } from './campaigns.js';
import { productLeasing, type BudgetLeases, type BudgetLeasing } from './leases.js';
import { ISSUE_TIME, jsonTimeOf, monthOf, periodRefusal } from './period.js';
import { COUPON_ISSUED_TOPIC, type IssueRequest, type IssueResult } from './issue.js';

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
export const SNAPSHOT_REFUSALS = ['NOT_FOUND', 'NOT_STARTED', 'ENDED', 'MONTHLY_CAP', 'BUDGET_EXCEEDED'] as const;

/** SNAPSHOT_REFUSALS as a SQL list. */
export const snapshotRefusals = sql.raw(SNAPSHOT_REFUSALS.map((outcome) => `'${outcome}'`).join(', '));

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
  budget_slots: number | null;
  budget_lease_coupons: number | null;
  /** Coupons left in this process's own lease, when the issue took from it. */
  own_lease_left: number | null;
}

/** A coupon row `k` as JSON writes IssueResult (its time as Date.prototype.toJSON does), so that a replay reads as the first answer did. */
export const couponJson = (status: string, k: string, expiresAt: RawBuilder<Date | null>) =>
  sql`jsonb_build_object('status', ${sql.lit(status)}, 'coupon', jsonb_build_object('id', ${sql.raw(k)}.id, 'campaignId', ${sql.raw(k)}.campaign_id,
    'memberId', ${sql.raw(k)}.member_id, 'month', ${sql.raw(k)}.month, 'amountYen', ${sql.raw(k)}.amount_yen,
    'issuedAt', ${jsonTimeOf(sql`${sql.raw(k)}.issued_at`)}, 'expiresAt', ${jsonTimeOf(expiresAt)}))`;

/**
 * The CTE `guard` (one row, `ok`): the session's lock and statement timeouts are both in force and
 * within the request's (a pooler's older server connection may lack the role's defaults). A
 * statement writes nothing without them and answers AS_TRANSACTION; one issue's and a batch's alike.
 */
export const timeoutGuardCte = (p: { lockTimeoutMs: unknown; statementTimeoutMs: unknown }) => sql`guard as (
      select current_setting('lock_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.lockTimeoutMs}::int / 1000.0)
         and current_setting('statement_timeout')::interval between interval '1 millisecond' and make_interval(secs => ${p.statementTimeoutMs}::int / 1000.0)
             as ok
    )`;

/**
 * The whole issue as one statement (docs/design.md §4), the same in both ways it runs: as its own
 * implicit transaction (one-statement.ts), and inside a transaction when that cannot run
 * (issue-transaction.ts). The lock order is the Idempotency-Key, the coupon's unique index entry,
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
      select id, campaign_id, member_id, month, amount_yen, issued_at from coupons
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
      select id, campaign_id, member_id, month, amount_yen, issued_at from inserted where exists (select 1 from taken)
      union all
      select id, campaign_id, member_id, month, amount_yen, issued_at from seen where (select outcome from decision) = 'ALREADY_ISSUED'
    ), audit_row as (
      insert into audit_log (tenant_id, actor_user_id, role, operation, entity_ids, request_id)
      select ${p.auditTenantId}, ${p.actorUserId}, ${p.role}, ${p.operation}, array[k.id::text, k.campaign_id], ${p.requestId} from coupon k
    )
    select d.outcome, k.id, k.campaign_id, k.member_id, k.month, k.amount_yen, k.issued_at,
           case when k.id is not null then d.coupons_expire_at end as expires_at, d.budget_slots, d.budget_lease_coupons,
           (select own_lease_left from taken) as own_lease_left,
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

type Statements = Record<BuiltFor, { plain: ReturnType<typeof issueStatement>; keyed: ReturnType<typeof issueStatement> }>;
const BUILT_FOR: BuiltFor[] = ['any', 'one row', 'slots', 'leases'];
const statementsByLeasing = new Map<BudgetLeasing, Statements>();
const statementsFor = (leasing: BudgetLeasing): Statements => {
  let statements = statementsByLeasing.get(leasing);
  if (!statements) {
    const built = BUILT_FOR.map((shape) => [
      shape,
      { plain: issueStatement(false, leasing, shape), keyed: issueStatement(true, leasing, shape) },
    ]);
    statements = Object.fromEntries(built) as Statements;
    statementsByLeasing.set(leasing, statements);
  }
  return statements;
};
statementsFor(productLeasing);

/** Campaigns remembered at once: more than a process issues on in a while. */
const SHAPES_REMEMBERED = 10_000;

/**
 * The shapes of the campaigns this process issued on, so that an issue runs the statement built
 * for its campaign's shape. A campaign's shape never changes; a statement that meets another shape
 * writes nothing and says so, and the shape is learned again.
 */
export class CampaignShapes {
  private readonly known = new LRUCache<string, CampaignShape>({ max: SHAPES_REMEMBERED });

  get(tenantId: string, campaignId: string): CampaignShape | undefined {
    return this.known.get(`${tenantId}\u0000${campaignId}`);
  }

  learned(tenantId: string, campaignId: string, shape: CampaignShape): void {
    const key = `${tenantId}\u0000${campaignId}`;
    if (this.known.peek(key) !== shape) this.known.set(key, shape);
  }
}

/** What runs a one-statement issue together with others on its campaign (coalescer.ts); `alone` runs it in a statement of its own. */
export interface IssueBatcher {
  issue(
    pin: PinConnection,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    context: IssueContext,
    alone: () => Promise<IssueResult | typeof AS_TRANSACTION>,
  ): Promise<IssueResult | typeof AS_TRANSACTION>;
}

/** What an issue runs under, whichever way: the timeouts its statement checks for, and the process's leases. */
export interface IssueContext {
  timeouts: Pick<TransactionSettings, 'lockTimeoutMs' | 'statementTimeoutMs'>;
  leases: Pick<BudgetLeases, 'holder' | 'issued' | 'leasing'>;
  /** The shapes of campaigns this process knows. */
  shapes: CampaignShapes;
  /** Epoch ms: the request's deadline. */
  deadline: number;
  /** Told each time a one-statement issue met a race and runs again (SQLSTATE 40001, for a metric). */
  onRace?: () => void;
  /** Batches this process's concurrent one-statement issues per campaign; without it each issue is a statement of its own. */
  coalescer?: IssueBatcher;
  /**
   * Gives the request's admission turn back while `wait` runs, then waits for one again (the
   * operation's OperationTurn): an issue waiting for another's batch holds no turn, so the batch
   * can grow past MAX_IN_FLIGHT. `back` is false when no turn came back.
   */
  stepOut?: <T>(wait: () => Promise<T>) => Promise<{ value: T; back: boolean }>;
}

type Refusal = 'NOT_STARTED' | 'ENDED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED';

const refusal = (status: Refusal) => new RollbackAndReturn<IssueResult>({ status, coupon: null });

/** The statement ran into a concurrent write (a budget row gone full while it waited, a double tap): it rolled back whole and may run again. */
export function isRacedIssue(error: unknown): boolean {
  return sqlStateOf(error) === SqlState.serializationFailure;
}

/**
 * Runs the issue's statement once on `executor`: the connection of a one-statement unit, or a
 * transaction. ISSUED and ALREADY_ISSUED are returned; a refusal is a RollbackAndReturn (nothing
 * written; keyed, in one statement: its claim, committed expired); a key another request holds
 * throws KeyHeldElsewhere (bookkeeping.claimed); a race throws the statement's SQLSTATE 40001
 * (isRacedIssue), which a one-statement unit answers by running again and a transaction by
 * rerunning the transaction; AS_TRANSACTION when the session lacks the timeouts.
 */
export async function runIssue(
  executor: Kysely<DB> | Transaction<DB>,
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  context: IssueContext,
): Promise<IssueResult | typeof AS_TRANSACTION> {
  const { tenantId, campaignId } = request;
  const { leases, shapes } = context;
  const values = issueValuesOf(request, bookkeeping, context);
  const statements = statementsFor(leases.leasing);
  const run = async (shape: BuiltFor): Promise<IssueRow> => {
    const statement = statements[shape];
    try {
      const row = bookkeeping.claim
        ? (await statement.keyed.execute(executor, { ...values, ...bookkeeping.claim })).rows[0]!
        : (await statement.plain.execute(executor, values)).rows[0]!;
      learnShape(shapes, request, row);
      return row;
    } catch (error) {
      if (sqlStateOf(error) !== ISSUE_REFUSED) throw error;
      const outcome = (error as Error).message;
      if (outcome === 'MONTHLY_CAP' || outcome === 'BUDGET_EXCEEDED') throw refusal(outcome);
      throw error;
    }
  };
  let row = await run(shapes.get(tenantId, campaignId) ?? 'any');
  // It wrote nothing: the campaign is not of the shape this process knew it by (learned again now).
  if (row.outcome === 'OTHER_SHAPE') row = await run('any');
  if (row.outcome === 'OTHER_SHAPE') throw new Error('issueCoupon: the statement built for any campaign answered OTHER_SHAPE');
  return answerOf(row, request, bookkeeping, leases);
}

/** The values of one issue's statement (and of its member in a batch, issue-batch.ts), made in the request's own context. */
export function issueValuesOf(
  request: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  { timeouts, leases }: IssueContext,
): IssueValues {
  const { tenantId, memberId, campaignId, timeZone } = request;
  return {
    tenantId,
    campaignId,
    memberId,
    timeZone,
    couponId: randomUUID(),
    lockTimeoutMs: timeouts.lockTimeoutMs,
    statementTimeoutMs: timeouts.statementTimeoutMs,
    leaseHolder: leases.holder,
    spread: Math.floor(Math.random() * MAX_BUDGET_SLOTS),
    traceparent: tracing.enabled ? traceparentOf() : null,
    ...bookkeeping.finishInStatement(),
  };
}

/** Remembers the campaign's shape from a row that read the campaign. */
export function learnShape(
  shapes: CampaignShapes,
  { tenantId, campaignId }: IssueRequest,
  row: Pick<IssueRow, 'budget_slots' | 'budget_lease_coupons'>,
) {
  if (row.budget_slots !== null && row.budget_lease_coupons !== null) {
    shapes.learned(tenantId, campaignId, shapeOf(row.budget_slots, row.budget_lease_coupons));
  }
}

/**
 * The answer of an issue's row, the same for one statement and for a member of a batch: ISSUED
 * and ALREADY_ISSUED are returned, a refusal is thrown as a RollbackAndReturn, a key another
 * request holds as KeyHeldElsewhere (bookkeeping.claimed), a missing campaign as NOT_FOUND.
 */
export function answerOf(
  row: IssueRow,
  { tenantId, campaignId }: IssueRequest,
  bookkeeping: Bookkeeping<IssueResult>,
  leases: IssueContext['leases'],
): IssueResult | typeof AS_TRANSACTION {
  switch (row.outcome) {
    case 'AS_TRANSACTION':
      return AS_TRANSACTION;
    case 'KEY_HELD':
      return bookkeeping.claimed(false) as never;
    case 'NOT_FOUND':
      throw notFound('Campaign');
    case 'OTHER_SHAPE':
      throw new Error('issueCoupon: an issue answered OTHER_SHAPE where it must not');
    case 'NOT_STARTED':
    case 'ENDED':
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
          expiresAt: row.expires_at,
        },
      };
    }
  }
}
