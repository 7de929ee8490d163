import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.js';

export interface PaymentStats {
  /** Payments whose outcome is not known yet. */
  pending: number;
  /** Of those, the ones past PAYMENTS_RECONCILE_FOR, which nobody resends any more. */
  unsettled: number;
}

/** Pending payments in one statement (the partial index payment_intents_due holds exactly them). */
export async function paymentStats(db: Kysely<DB>, reconcileForMs: number): Promise<PaymentStats> {
  const { rows } = await sql<PaymentStats>`
    select count(*)::int as pending,
           (count(*) filter (where created_at <= now() - make_interval(secs => ${reconcileForMs / 1000})))::int as unsettled
      from payment_intents where status = 'pending'`.execute(db);
  return rows[0]!;
}
