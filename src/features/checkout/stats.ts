import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.js';

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

export interface UnsettledPayment {
  tenantId: string;
  orderId: string;
  memberId: string;
  amountYen: number;
  createdAt: Date;
  resends: number;
  lastError: string | null;
}

/**
 * The payments nobody resends any more (pending past PAYMENTS_RECONCILE_FOR), oldest first: for
 * an operator to look up at the provider by metadata order_id. `tenantId` null: every tenant.
 */
export async function unsettledPayments(db: Kysely<DB>, reconcileForMs: number, tenantId: string | null): Promise<UnsettledPayment[]> {
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
      'p.last_error as lastError',
    ])
    .where('p.status', '=', 'pending')
    .where('p.created_at', '<=', sql<Date>`now() - make_interval(secs => ${reconcileForMs / 1000})`);
  if (tenantId !== null) query = query.where('p.tenant_id', '=', tenantId);
  return query.orderBy('p.created_at').limit(1_000).execute();
}
