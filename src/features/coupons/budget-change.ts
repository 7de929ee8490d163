import { sql, type Transaction } from 'kysely';
import type { CampaignRow, DB } from '../../db/schema.js';
import { RollbackAndReturn } from '../../db/transaction.js';
import { notFound } from '../../core/errors.js';
import { toCampaign, type Campaign } from './campaigns.js';
import { jsonTimeOf } from './period.js';

/** changeCampaignBudget: a tenant admin sets a campaign's budget while its members issue (docs/design.md §4, "Budget changes"). */

export interface BudgetChangeRequest {
  tenantId: string;
  campaignId: string;
  /** The new budget, in yen: at least what members hold (the coupons issued). */
  budgetYen: number;
}

type BudgetChangeStatus = 'CHANGED' | 'BELOW_ISSUED';

export interface BudgetChangeResult {
  status: BudgetChangeStatus;
  /** As the change left it (CHANGED), or as it stands (BELOW_ISSUED). */
  campaign: Campaign;
}

/**
 * What changeCampaignBudget's audit row names.
 *
 * @example budgetChangeEntities(result) // [campaignId]
 */
export const budgetChangeEntities = ({ campaign }: BudgetChangeResult): string[] => [campaign.id];

export const CAMPAIGN_BUDGET_CHANGED_TOPIC = 'campaign.budget_changed';

/** How a budget is changed (AppServices.budgetChanger; buildServices takes a stand-in); test/naive keeps the change that rewrites slots without their locks. */
export interface BudgetChanger {
  change(trx: Transaction<DB>, request: BudgetChangeRequest): Promise<BudgetChangeResult>;
}

interface ChangeRow extends CampaignRow {
  outcome: 'NOT_FOUND' | 'RACED' | 'BELOW_ISSUED' | 'CHANGED';
  /** What members hold: the slots' and the leases' issued yen, once every one of them is locked. */
  floor_yen: number;
  /** The budget in force when the rows were locked: the slots' budgets add up to it. */
  budget_before: number;
}

/**
 * Sets the campaign's budget in one statement that takes the locks an issue takes, on every row
 * an issue may take from: every lease of the campaign in holder order, then every slot in slot
 * order (lease rows before the budget row, and several slots in slot order, as every writer of
 * several of them locks them; an issue holds one and waits for none while it does, so no circle of
 * waits forms). Once they are all locked, nothing issues from the campaign until this commits, and
 * what members hold is known exactly:
 *
 * - every lease is taken back first, its issued yen into slot 0's issued and the rest back to the
 *   room (a lease is room set aside for a process, not held by anyone): the floor is the coupons
 *   issued, not what processes leased. A process whose lease went takes from the budget row and
 *   leases again from the new room;
 * - below the floor the answer is BELOW_ISSUED and nothing changes (RollbackAndReturn);
 * - otherwise the room (the new budget less the floor) is split over the slots by whole coupons,
 *   as splitByCoupons splits a new campaign's budget, each slot keeping what it issued: every slot
 *   holds whole coupons of room (slot 0 also the yen no coupon can use), so the campaign sells out
 *   exactly at floor(budgetYen / discountYen) coupons of the new budget. An issue that chose a slot
 *   in its snapshot and waited for it rechecks the room on the new row: gone, it runs again on a
 *   fresh snapshot. The campaign row gets the new figure (a plain UPDATE: a row lock of the
 *   campaign would wait for every issue, whose coupon's foreign key holds a share lock on it), and
 *   a `campaign.budget_changed` event rides in the statement.
 *
 * A lease a refill made between the lease locks and the slot locks is not among the locked ones:
 * the leased yen of slot 0 then differs from the locked leases', the statement writes nothing and
 * raises SQLSTATE 40001 (campaign_budget_raced), and the transaction runs again.
 *
 * @example await changeCampaignBudget(trx, { tenantId, campaignId, budgetYen: 50_000 })
 */
export async function changeCampaignBudget(trx: Transaction<DB>, request: BudgetChangeRequest): Promise<BudgetChangeResult> {
  const { tenantId, campaignId, budgetYen } = request;
  const { rows } = await sql<ChangeRow>`
    with leases as (
      select l.holder, l.budget_yen, l.issued_yen from campaign_budget_leases l
       where l.tenant_id = ${tenantId} and l.campaign_id = ${campaignId}
       order by l.holder
         for update of l
    ), slots as (
      select s.slot, s.budget_yen, s.issued_yen, s.leased_yen from campaign_budget_slots s
       where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and (select count(*) from leases) >= 0
       order by s.slot
         for update of s
    ), standing as (
      select (select coalesce(sum(issued_yen), 0) from slots) + (select coalesce(sum(issued_yen), 0) from leases) as floor_yen,
             (select coalesce(sum(budget_yen), 0) from slots) as budget_before,
             (select coalesce(sum(leased_yen), 0) from slots) <> (select coalesce(sum(budget_yen), 0) from leases) as raced
    ), decision as (
      select c.*, s.floor_yen::int, s.budget_before::int,
             case when s.raced then 'RACED' when ${budgetYen}::int < s.floor_yen then 'BELOW_ISSUED' else 'CHANGED' end as outcome
        from campaigns c, standing s
       where c.tenant_id = ${tenantId} and c.id = ${campaignId}
    ), room as (
      select d.discount_yen, ${budgetYen}::int - d.floor_yen as yen, ((${budgetYen}::int - d.floor_yen) / d.discount_yen) as coupons,
             (select count(*)::int from slots) as slots
        from decision d where d.outcome = 'CHANGED'
    ), resplit as (
      select s.slot,
             s.issued_yen + case when s.slot = 0 then (select coalesce(sum(issued_yen), 0) from leases) else 0 end as issued_yen,
             s.issued_yen + case when s.slot = 0 then (select coalesce(sum(issued_yen), 0) from leases) + r.yen % r.discount_yen else 0 end
               + r.discount_yen * (r.coupons / r.slots + case when s.slot < r.coupons % r.slots then 1 else 0 end) as budget_yen
        from slots s, room r
    ), taken_back as (
      delete from campaign_budget_leases l using leases k
       where l.tenant_id = ${tenantId} and l.campaign_id = ${campaignId} and l.holder = k.holder and exists (select 1 from room)
      returning l.budget_yen - l.issued_yen as unissued_yen
    ), resized as (
      update campaign_budget_slots s set budget_yen = r.budget_yen, issued_yen = r.issued_yen, leased_yen = 0
        from resplit r
       where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and s.slot = r.slot
      returning s.slot
    ), changed as (
      update campaigns c set budget_yen = ${budgetYen}
       where c.tenant_id = ${tenantId} and c.id = ${campaignId} and exists (select 1 from room)
      returning c.id
    ), event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${CAMPAIGN_BUDGET_CHANGED_TOPIC},
             jsonb_build_object('tenantId', ${tenantId}::text, 'campaignId', d.id, 'budgetYen', ${budgetYen}::int,
                                'previousBudgetYen', d.budget_before, 'issuedYen', d.floor_yen,
                                'leasedYenTakenBack', (select coalesce(sum(unissued_yen), 0)::int from taken_back),
                                'changedAt', ${jsonTimeOf(sql`now()`)})
        from decision d, changed
    )
    select d.*, case when d.outcome = 'RACED' then campaign_budget_raced() end as raced
      from decision d`.execute(trx);
  const row = rows[0];
  if (!row) throw notFound('Campaign');
  if (row.outcome === 'BELOW_ISSUED') {
    throw new RollbackAndReturn<BudgetChangeResult>({
      status: 'BELOW_ISSUED',
      campaign: toCampaign({ ...row, budget_yen: row.budget_before }, row.floor_yen),
    });
  }
  return { status: 'CHANGED', campaign: toCampaign({ ...row, budget_yen: budgetYen }, row.floor_yen) };
}

export const budgetChanger: BudgetChanger = { change: changeCampaignBudget };
