import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.js';

export interface PaymentStats {
  /** Payments whose outcome is not known yet. */
  pending: number;
  /** Of those, the ones waiting on their customer to finish an authentication (3-D Secure). */
  awaitingCustomer: number;
  /** Of those, the ones set aside for an operator, which nobody asks about any more. */
  unsettled: number;
  /** Of those, the ones past PAYMENTS_RECONCILE_FOR that never named a PaymentIntent: searched for, never created again. */
  pastKeyLifetime: number;
}

/** Pending payments in one statement (the partial index payment_intents_due holds exactly them). */
export async function paymentStats(db: Kysely<DB>, reconcileForMs: number): Promise<PaymentStats> {
  const { rows } = await sql<PaymentStats>`
    select count(*)::int as pending,
           (count(*) filter (where provider_status = 'requires_action'))::int as "awaitingCustomer",
           (count(*) filter (where set_aside_at is not null))::int as unsettled,
           (count(*) filter (where provider_intent_id is null
                               and created_at <= now() - make_interval(secs => ${reconcileForMs / 1000})))::int as "pastKeyLifetime"
      from payment_intents where status = 'pending'`.execute(db);
  return rows[0]!;
}

export interface UnsettledPayment {
  tenantId: string;
  orderId: string;
  memberId: string;
  amountYen: number;
  createdAt: Date;
  resends: number;
  /** The PaymentIntent an answer named, if one did. */
  paymentIntentId: string | null;
  /** Why it was set aside. */
  lastError: string | null;
}

/**
 * The payments set aside for an operator (the provider answered what does not match the order, or
 * failed the same way for about a day), oldest first: for an operator to look up at the provider by
 * metadata order_id and settle with npm run reconcile -- --settle. `tenantId` null: every tenant.
 */
export async function unsettledPayments(db: Kysely<DB>, tenantId: string | null): Promise<UnsettledPayment[]> {
  let query = db
    .selectFrom('payment_intents as p')
    .innerJoin('orders as o', (join) => join.onRef('o.tenant_id', '=', 'p.tenant_id').onRef('o.id', '=', 'p.order_id'))
    .select([
      'p.tenant_id as tenantId',
      'p.order_id as orderId',
      'o.member_id as memberId',
      'p.amount_yen as amountYen',
      'p.created_at as createdAt',
      'p.resends as resends',
      'p.provider_intent_id as paymentIntentId',
      'p.last_error as lastError',
    ])
    .where('p.status', '=', 'pending')
    .where('p.set_aside_at', 'is not', null);
  if (tenantId !== null) query = query.where('p.tenant_id', '=', tenantId);
  return query.orderBy('p.created_at').limit(1_000).execute();
}
