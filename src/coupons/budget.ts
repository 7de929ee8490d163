import { sql, type RawBuilder } from 'kysely';
import type { BudgetLeasing } from './leases.js';

/**
 * Where an issue finds the yen for its coupon (docs/design.md §4): the campaign's budget slot
 * rows, and with budget leases the budget row (slot 0) and the leases. One definition of room for
 * every reader and writer, so that the snapshot's sold-out answer and the rows an issue takes from
 * can never disagree: a row has room when one more coupon fits in it.
 */

/** A budget slot row `alias` has room for `amount` (leased-out yen is not its to issue). */
export const slotHasRoom = (alias: string, amount: RawBuilder<unknown>) =>
  sql`${sql.raw(alias)}.issued_yen + ${sql.raw(alias)}.leased_yen + ${amount} <= ${sql.raw(alias)}.budget_yen`;

/** A lease row `alias` has room for `amount`. */
export const leaseHasRoom = (alias: string, amount: RawBuilder<unknown>) =>
  sql`${sql.raw(alias)}.issued_yen + ${amount} <= ${sql.raw(alias)}.budget_yen`;

/** The campaign whose rows a statement reads, this process's lease holder, and how it takes from leases. */
export interface BudgetRowsOf {
  tenantId: unknown;
  campaignId: unknown;
  /** This process's name on its leases. */
  holder: unknown;
  leasing: BudgetLeasing;
}

const slotsOf = (at: BudgetRowsOf, alias: string) =>
  sql`${sql.raw(alias)}.tenant_id = ${at.tenantId} and ${sql.raw(alias)}.campaign_id = ${at.campaignId}`;
const leasesOf = (at: BudgetRowsOf, alias: string) =>
  sql`${sql.raw(alias)}.tenant_id = ${at.tenantId} and ${sql.raw(alias)}.campaign_id = ${at.campaignId} and ${at.leasing.mayTake(alias, at.holder)}`;

/**
 * Whether any row an issue may take from has room for `amount`: a slot, or a lease this process
 * may issue against. Whole coupons make this exact: every slot holds whole coupons (the yen no
 * coupon can use on slot 0 only), and yen moves between the budget row and leases only in whole
 * coupons, so no row has room exactly when less than one coupon is left in all of them together.
 */
export function campaignHasRoom(at: BudgetRowsOf, amount: RawBuilder<unknown>) {
  return sql`(exists (select 1 from campaign_budget_slots r where ${slotsOf(at, 'r')} and ${slotHasRoom('r', amount)})
          or exists (select 1 from campaign_budget_leases r where ${leasesOf(at, 'r')} and ${leaseHasRoom('r', amount)}))`;
}

/**
 * The CTEs that take the coupon's amount from one row with room, and `taken` (one row when it was
 * taken: `own_lease_left`, the coupons left in this process's own lease when the issue took from
 * it). `ask` names a CTE of one row (amount_yen, budget_slots, budget_lease_coupons), or none when
 * nothing is to be taken. `spread` (0 to 63) is where this issue starts looking among the slots,
 * so that concurrent issues of one campaign look at different slots first.
 *
 * Every lock an issue takes here is its only one among the budget and lease rows, and it waits for
 * none while it holds another. A candidate is a row with room in the statement's snapshot; it is
 * locked with a recheck that asks only for the row itself, never for its room (READ COMMITTED
 * rechecks a locked row's WHERE against its newest version, EvalPlanQual, and a row that fails the
 * recheck stays locked while the scan goes on to the next: two issues could then each hold a full
 * row the other waits for). So exactly one row is locked, and its newest version says whether the
 * room is still there:
 * - leases: one this process may take from that nobody holds (its own first); else, when the
 *   budget row had room, the budget row, waiting for it; else one such lease, waiting for it;
 * - several slots: one that nobody holds, from `spread` on; else one such slot, waiting for it;
 * - one slot and no leases: the slot, waiting for it.
 * A row whose room went meanwhile is not written: `taken` stays empty and the caller raises (the
 * statement rolls back whole and runs again on a fresh snapshot, or refuses when nothing else
 * could have room).
 */
export function takeBudgetCtes(at: BudgetRowsOf, ask: string, spread: unknown) {
  const a = sql.raw(ask);
  const amount = sql`(select amount_yen from ${a})`;
  const withLeases = sql`(select budget_lease_coupons > 0 from ${a})`;
  const withSlots = sql`(select budget_slots > 1 from ${a})`;
  const oneRow = sql`(select budget_slots = 1 and budget_lease_coupons = 0 from ${a})`;
  const budgetRowHasRoom = sql`exists (select 1 from campaign_budget_slots r where ${slotsOf(at, 'r')} and r.slot = 0 and ${slotHasRoom('r', amount)})`;
  // The candidates as a list computed once from the snapshot: the lock's recheck then asks only for the row's key.
  const leaseCandidates = sql`l.tenant_id = ${at.tenantId} and l.campaign_id = ${at.campaignId}
       and l.holder = any (array(select r.holder from campaign_budget_leases r where ${leasesOf(at, 'r')} and ${leaseHasRoom('r', amount)}))`;
  const slotCandidates = sql`s.tenant_id = ${at.tenantId} and s.campaign_id = ${at.campaignId}
       and s.slot = any (array(select r.slot from campaign_budget_slots r where ${slotsOf(at, 'r')} and ${slotHasRoom('r', amount)}))`;
  const ownFirst = sql`order by l.holder = ${at.holder} desc, l.holder limit 1`;
  const fromSpread = sql`order by (s.slot + ${spread}::int) % (select budget_slots from ${a}) limit 1`;
  return sql`lease_free as (
      select l.holder, ${leaseHasRoom('l', amount)} as has_room from campaign_budget_leases l
       where ${withLeases} and ${leaseCandidates}
       ${ownFirst} for update of l skip locked
    ), lease_wait as (
      select l.holder, ${leaseHasRoom('l', amount)} as has_room from campaign_budget_leases l
       where ${withLeases} and not exists (select 1 from lease_free) and not ${budgetRowHasRoom} and ${leaseCandidates}
       ${ownFirst} for update of l
    ), lease as (
      select holder from lease_free where has_room
      union all
      select holder from lease_wait where has_room
    ), leased as (
      update campaign_budget_leases l set issued_yen = l.issued_yen + ${amount}
       where l.tenant_id = ${at.tenantId} and l.campaign_id = ${at.campaignId} and l.holder = (select holder from lease)
      returning case when l.holder = ${at.holder} then (l.budget_yen - l.issued_yen) / ${amount} end as own_lease_left
    ), slot_free as (
      select s.slot, ${slotHasRoom('s', amount)} as has_room from campaign_budget_slots s
       where ${withSlots} and ${slotCandidates}
       ${fromSpread} for update of s skip locked
    ), slot_wait as (
      select s.slot, ${slotHasRoom('s', amount)} as has_room from campaign_budget_slots s
       where ${withSlots} and not exists (select 1 from slot_free) and ${slotCandidates}
       ${fromSpread} for update of s
    ), chosen as (
      select 0 as slot
       where ${oneRow} or (${withLeases} and not exists (select 1 from lease_free) and ${budgetRowHasRoom})
      union all
      select slot from slot_free where has_room
      union all
      select slot from slot_wait where has_room
    ), slotted as (
      update campaign_budget_slots s set issued_yen = s.issued_yen + ${amount}
       where s.tenant_id = ${at.tenantId} and s.campaign_id = ${at.campaignId} and s.slot = (select slot from chosen) and ${slotHasRoom('s', amount)}
      returning s.slot
    ), taken as (
      select null::int as own_lease_left from slotted
      union all
      select own_lease_left from leased
    )`;
}

/** Taking nothing from a row that went full while the issue waited is final only for a campaign of one budget row without leases. */
export function tookNothingIsFinal(ask: string) {
  return sql`(select budget_slots = 1 and budget_lease_coupons = 0 from ${sql.raw(ask)})`;
}
