import { sql, type RawBuilder } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { BudgetLeasing } from './leases.js';

/**
 * Where an issue finds the yen for its coupon (docs/design.md §4): the campaign's budget slot
 * rows, and with budget leases the budget row (slot 0) and the leases. One definition of room for
 * every reader and writer, so that the snapshot's sold-out answer and the rows an issue takes from
 * can never disagree: a row has room when one more coupon fits in it.
 */

/**
 * A budget slot row `alias` has room for `amount` (leased-out yen is not its to issue).
 *
 * @example sql`select 1 from campaign_budget_slots s where ${slotHasRoom('s', sql`${amountYen}`)}`
 */
export const slotHasRoom = (alias: string, amount: RawBuilder<unknown>) =>
  sql`${sql.raw(alias)}.issued_yen + ${sql.raw(alias)}.leased_yen + ${amount} <= ${sql.raw(alias)}.budget_yen`;

/** A lease row `alias` has room for `amount`. */
const leaseHasRoom = (alias: string, amount: RawBuilder<unknown>) =>
  sql`${sql.raw(alias)}.issued_yen + ${amount} <= ${sql.raw(alias)}.budget_yen`;

/**
 * Which rows a campaign's budget lies in, fixed when it is created: one budget row, several slots,
 * or the budget row and leases (budgetLeaseCoupons needs one slot).
 */
export type CampaignShape = 'one row' | 'slots' | 'leases';

const shapeOf = (budgetSlots: number, budgetLeaseCoupons: number): CampaignShape =>
  budgetLeaseCoupons > 0 ? 'leases' : budgetSlots > 1 ? 'slots' : 'one row';

/** Campaigns remembered at once: more than a process issues on in a while. */
const SHAPES_REMEMBERED = 10_000;

/**
 * The shapes of the campaigns this process issued on, so that an issue runs the statement built
 * for its campaign's shape. A campaign's shape never changes; a statement that meets another shape
 * writes nothing and says so, and the shape is learned again.
 *
 * @example shapes.get(tenantId, campaignId) ?? 'any'
 */
export class CampaignShapes {
  private readonly known = new LRUCache<string, CampaignShape>({ max: SHAPES_REMEMBERED });

  get(tenantId: string, campaignId: string): CampaignShape | undefined {
    return this.known.get(`${tenantId}\u0000${campaignId}`);
  }

  /**
   * Remembers the campaign's shape from a statement's row that read the campaign (its budget
   * columns are null when it did not).
   *
   * @example shapes.learnFrom({ tenantId, campaignId }, row)
   */
  learnFrom(
    { tenantId, campaignId }: { tenantId: string; campaignId: string },
    row: { budget_slots: number | null; budget_lease_coupons: number | null },
  ): void {
    if (row.budget_slots === null || row.budget_lease_coupons === null) return;
    const shape = shapeOf(row.budget_slots, row.budget_lease_coupons);
    const key = `${tenantId}\u0000${campaignId}`;
    if (this.known.peek(key) !== shape) this.known.set(key, shape);
  }
}

/**
 * What an issue's statement is built for: one shape (it then holds only that shape's parts: every
 * part costs PostgreSQL to set up on each run, and again on each recheck of a row it waited for),
 * or `any`, which finds the shape out and holds every part.
 */
export type BuiltFor = CampaignShape | 'any';

/**
 * The campaign row `alias` has `shape`.
 *
 * @example sql`select 1 from campaigns c where ${hasShape('c', 'slots')}`
 */
export function hasShape(alias: string, shape: CampaignShape) {
  const c = sql.raw(alias);
  if (shape === 'leases') return sql`${c}.budget_lease_coupons > 0`;
  return shape === 'slots' ? sql`${c}.budget_slots > 1` : sql`(${c}.budget_slots = 1 and ${c}.budget_lease_coupons = 0)`;
}

/** The campaign whose rows a statement reads, this process's lease holder, and how it takes from leases. */
export interface BudgetRowsOf {
  tenantId: unknown;
  campaignId: unknown;
  /** This process's name on its leases. */
  holder: unknown;
  leasing: BudgetLeasing;
}

const ofCampaign = (at: BudgetRowsOf, alias: string) =>
  sql`${sql.raw(alias)}.tenant_id = ${at.tenantId} and ${sql.raw(alias)}.campaign_id = ${at.campaignId}`;
const leasesTaken = (at: BudgetRowsOf, alias: string) => sql`${ofCampaign(at, alias)} and ${at.leasing.mayTake(alias, at.holder)}`;
const withLeases = (shape: BuiltFor) => shape === 'any' || shape === 'leases';

/**
 * Whether any row an issue may take from has room for `amount`: a slot, or a lease this process
 * may issue against. Whole coupons make this exact: every slot holds whole coupons (the yen no
 * coupon can use on slot 0 only), and yen moves between the budget row and leases only in whole
 * coupons, so no row has room exactly when less than one coupon is left in all of them together.
 *
 * @example sql`select ${campaignHasRoom(rows, sql`c.discount_yen`, 'slots')} from campaigns c`
 */
export function campaignHasRoom(at: BudgetRowsOf, amount: RawBuilder<unknown>, shape: BuiltFor) {
  const slots = sql`exists (select 1 from campaign_budget_slots r where ${ofCampaign(at, 'r')} and ${slotHasRoom('r', amount)})`;
  if (!withLeases(shape)) return slots;
  return sql`(${slots} or exists (select 1 from campaign_budget_leases r where ${leasesTaken(at, 'r')} and ${leaseHasRoom('r', amount)}))`;
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
 *
 * @example sql`with ask as (…), ${takeBudgetCtes(rows, 'ask', spread, 'slots')} select * from taken`
 */
export function takeBudgetCtes(at: BudgetRowsOf, ask: string, spread: unknown, shape: BuiltFor) {
  const a = sql.raw(ask);
  const amount = sql`a.amount_yen`;
  // In a statement built for any shape, each part runs only for its own.
  const only = (part: CampaignShape) => (shape === 'any' ? sql`${hasShape('a', part)} and ` : sql``);
  const budgetRowHasRoom = sql`exists (select 1 from campaign_budget_slots r where ${ofCampaign(at, 'r')} and r.slot = 0 and ${slotHasRoom('r', amount)})`;
  // The candidates as a list made once from the snapshot: the lock's recheck then asks only for the row's key.
  const leaseCandidates = sql`${ofCampaign(at, 'l')}
       and l.holder = any (array(select r.holder from campaign_budget_leases r where ${leasesTaken(at, 'r')} and ${leaseHasRoom('r', amount)}))`;
  const slotCandidates = sql`${ofCampaign(at, 's')}
       and s.slot = any (array(select r.slot from campaign_budget_slots r where ${ofCampaign(at, 'r')} and ${slotHasRoom('r', amount)}))`;
  const ownFirst = sql`order by l.holder = ${at.holder} desc, l.holder limit 1`;
  const fromSpread = sql`order by (s.slot + ${spread}::int) % a.budget_slots limit 1`;
  const kinds = {
    lease: { from: sql.raw('campaign_budget_leases l'), key: sql.raw('l.holder'), room: leaseHasRoom('l', amount), order: ownFirst },
    slot: { from: sql.raw('campaign_budget_slots s'), key: sql.raw('s.slot'), room: slotHasRoom('s', amount), order: fromSpread },
  };
  /** The one row of its kind a lock returns (its key, and whether it still has room): one nobody holds, or one waited for. */
  const lockedOne = (name: string, kind: keyof typeof kinds, where: RawBuilder<unknown>, nobodyHolds: boolean) => {
    const k = kinds[kind];
    const lock = sql.raw(`for update of ${kind === 'lease' ? 'l' : 's'}${nobodyHolds ? ' skip locked' : ''}`);
    return sql`${sql.raw(name)} as (select ${k.key}, ${k.room} as has_room from ${k.from}, ${a} a where ${where} ${k.order} ${lock}), `;
  };
  const leases = sql`${lockedOne('lease_free', 'lease', sql`${only('leases')}${leaseCandidates}`, true)}
    ${lockedOne('lease_wait', 'lease', sql`${only('leases')}not exists (select 1 from lease_free) and not ${budgetRowHasRoom} and ${leaseCandidates}`, false)}
    leased as (
      update campaign_budget_leases l set issued_yen = l.issued_yen + ${amount}
        from ${a} a, (select holder from lease_free where has_room union all select holder from lease_wait where has_room) k
       where ${ofCampaign(at, 'l')} and l.holder = k.holder
      returning case when l.holder = ${at.holder} then (l.budget_yen - l.issued_yen) / ${amount} end as own_lease_left
    ), `;
  const slots = sql`${lockedOne('slot_free', 'slot', sql`${only('slots')}${slotCandidates}`, true)}
    ${lockedOne('slot_wait', 'slot', sql`${only('slots')}not exists (select 1 from slot_free) and ${slotCandidates}`, false)}`;
  const choices = [
    ...(shape === 'any' || shape === 'one row' ? [sql`select 0 as slot from ${a} a where ${only('one row')}true`] : []),
    ...(withLeases(shape)
      ? [sql`select 0 as slot from ${a} a where ${only('leases')}not exists (select 1 from lease_free) and ${budgetRowHasRoom}`]
      : []),
    ...(shape === 'any' || shape === 'slots'
      ? [sql`select slot from slot_free where has_room`, sql`select slot from slot_wait where has_room`]
      : []),
  ];
  return sql`${withLeases(shape) ? leases : sql``}${shape === 'any' || shape === 'slots' ? slots : sql``}slotted as (
      update campaign_budget_slots s set issued_yen = s.issued_yen + ${amount}
        from ${a} a, (${sql.join(choices, sql` union all `)}) k
       where ${ofCampaign(at, 's')} and s.slot = k.slot and ${slotHasRoom('s', amount)}
      returning s.slot
    ), taken as (
      select null::int as own_lease_left from slotted${withLeases(shape) ? sql` union all select own_lease_left from leased` : sql``}
    )`;
}

/**
 * Taking nothing from a row that went full while the issue waited is final only for a campaign of one budget row without leases.
 *
 * @example sql`case when ${tookNothingIsFinal('ask', 'one row')} then 'BUDGET_EXCEEDED' end`
 */
export function tookNothingIsFinal(ask: string, shape: BuiltFor) {
  if (shape !== 'any') return sql.lit(shape === 'one row');
  return sql`(select ${hasShape('a', 'one row')} from ${sql.raw(ask)} a)`;
}
