import { sql, type Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import { prepare } from '../db/prepared.js';
import { finishCtes, type FinishValues } from '../bookkeeping/bookkeeping.js';
import { COUPON_ISSUED_TOPIC } from './issue.js';

export interface BudgetValues extends FinishValues {
  tenantId: string;
  campaignId: string;
  amount: number;
  /** The outbox event's payload (JSON). */
  event: string;
}

/** How a statement finds the budget row it takes from (see takeBudget). */
type SlotChoice = 'the only slot' | 'a free slot' | 'wait for a slot';

/**
 * Takes `amount` from the campaign's budget; written with it, only when it was taken: the
 * coupon's outbox event, the audit row and (keyed) the stored response. These rows are new or
 * already held by this transaction, so they collide with nothing: the budget row is still the last
 * lock taken, and nothing runs between it and COMMIT. `room`: whether any slot had room as this
 * statement's snapshot saw them.
 */
function budgetStatement(choice: SlotChoice, keyed: boolean) {
  const name = `coupons.budget.${choice === 'the only slot' ? 'row' : choice === 'a free slot' ? 'skip' : 'wait'}${keyed ? '+key' : ''}`;
  return prepare<BudgetValues, { slot: number | null; room: boolean }>(name, (p) => {
    // Leased-out yen is not this row's to issue (leases: the one statement takes from them; this path does not).
    const hasRoom = sql`tenant_id = ${p.tenantId} and campaign_id = ${p.campaignId} and issued_yen + leased_yen + ${p.amount} <= budget_yen`;
    const taken =
      choice === 'the only slot'
        ? sql`update campaign_budget_slots set issued_yen = issued_yen + ${p.amount} where ${hasRoom} and slot = 0 returning slot`
        : sql`
          with free as (
            select slot from campaign_budget_slots where ${hasRoom}
             order by slot limit 1 ${choice === 'a free slot' ? sql`for update skip locked` : sql`for update`}
          )
          update campaign_budget_slots s set issued_yen = s.issued_yen + ${p.amount}
            from free
           where s.tenant_id = ${p.tenantId} and s.campaign_id = ${p.campaignId} and s.slot = free.slot
             and s.issued_yen + s.leased_yen + ${p.amount} <= s.budget_yen
          returning s.slot`;
    const wasTaken = sql`exists (select 1 from taken)`;
    return sql`
      with taken as (${taken}),
      event as (
        insert into outbox_events (tenant_id, topic, payload)
        select ${p.tenantId}, ${COUPON_ISSUED_TOPIC}, ${p.event}::jsonb where ${wasTaken}
      ), ${finishCtes(p, keyed, wasTaken)}
      select (select slot from taken) as slot, exists (select 1 from campaign_budget_slots where ${hasRoom}) as room`;
  });
}

const budgetStatements = {
  plain: {
    row: budgetStatement('the only slot', false),
    skip: budgetStatement('a free slot', false),
    wait: budgetStatement('wait for a slot', false),
  },
  keyed: {
    row: budgetStatement('the only slot', true),
    skip: budgetStatement('a free slot', true),
    wait: budgetStatement('wait for a slot', true),
  },
};

/**
 * False when no slot has room (the caller rolls back). With one slot the budget is one conditional
 * UPDATE: after waiting for the row lock, READ COMMITTED re-checks the WHERE against the newest
 * committed row, so the budget can never be overspent. With several slots an issue takes any slot
 * with room that nobody holds (SKIP LOCKED). Only when slots with room exist but are all held does
 * it wait for one; when none has room it refuses at once, since slots only ever fill up.
 */
export async function takeBudget(trx: Transaction<DB>, slots: number, values: BudgetValues, keyed: boolean): Promise<boolean> {
  const statements = keyed ? budgetStatements.keyed : budgetStatements.plain;
  if (slots === 1) return (await statements.row.execute(trx, values)).rows[0]!.slot !== null;
  const free = (await statements.skip.execute(trx, values)).rows[0]!;
  if (free.slot !== null) return true;
  if (!free.room) return false;
  return (await statements.wait.execute(trx, values)).rows[0]!.slot !== null;
}
