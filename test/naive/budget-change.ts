import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { CAMPAIGN_BUDGET_CHANGED_TOPIC, type BudgetChanger, type BudgetChangeResult } from '../../src/features/coupons/budget-change.js';
import { findCampaign, splitByCoupons } from '../../src/features/coupons/campaigns.js';
import { RollbackAndReturn } from '../../src/db/transaction.js';
import { notFound } from '../../src/core/errors.js';

/**
 * The budget change a newcomer writes first, kept to prove the concurrency tests can fail: read the
 * slots and leases (no lock), decide in TypeScript, then write every slot back whole (its budget,
 * its issued yen from the read, nothing leased) and delete the leases it read. An issue that
 * commits between the read and the write loses its yen from the slot it took (lost update): the
 * coupon stays, its yen is no longer counted, and the campaign issues past its budget. THINK_MS
 * stands in for the work such code does between its read and its write (an ORM's load and save).
 */
const THINK_MS = 5;

export const naiveBudgetChanger: BudgetChanger = {
  async change(trx, { tenantId, campaignId, budgetYen }) {
    const campaign = await findCampaign(trx, tenantId, campaignId);
    if (!campaign) throw notFound('Campaign');
    const slots = await trx
      .selectFrom('campaign_budget_slots')
      .select(['slot', 'issued_yen'])
      .where('tenant_id', '=', tenantId)
      .where('campaign_id', '=', campaignId)
      .orderBy('slot')
      .execute();
    if (budgetYen < campaign.issuedYen) throw new RollbackAndReturn<BudgetChangeResult>({ status: 'BELOW_ISSUED', campaign });
    await sleep(THINK_MS);
    const leasedIssued = campaign.issuedYen - slots.reduce((sum, s) => sum + s.issued_yen, 0);
    const room = splitByCoupons(budgetYen - campaign.issuedYen, campaign.discountYen, slots.length);
    for (const { slot, issued_yen: issued } of slots) {
      const issuedYen = issued + (slot === 0 ? leasedIssued : 0);
      await sql`update campaign_budget_slots set budget_yen = ${issuedYen + room[slot]!}, issued_yen = ${issuedYen}, leased_yen = 0
                 where tenant_id = ${tenantId} and campaign_id = ${campaignId} and slot = ${slot}`.execute(trx);
    }
    await sql`delete from campaign_budget_leases where tenant_id = ${tenantId} and campaign_id = ${campaignId}`.execute(trx);
    await sql`update campaigns set budget_yen = ${budgetYen} where tenant_id = ${tenantId} and id = ${campaignId}`.execute(trx);
    await sql`insert into outbox_events (tenant_id, topic, payload)
              values (${tenantId}, ${CAMPAIGN_BUDGET_CHANGED_TOPIC}, ${JSON.stringify({ tenantId, campaignId, budgetYen })}::jsonb)`.execute(
      trx,
    );
    return { status: 'CHANGED', campaign: { ...campaign, budgetYen } };
  },
};
