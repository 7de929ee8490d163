import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { DB, OrderStatus } from '../../db/schema.js';
import { ORDER_REFUNDED_TOPIC, toOrder, type Order, type OrderColumns } from './orders.js';

/**
 * A refund the provider made, recorded (docs/design.md §11), whoever made it: refundOrder's own,
 * once an answer or a list says it was made, or one made in Stripe's dashboard or by another client
 * of the account, found in a list of refunds. Each is counted once, by the provider's refund id: a
 * statement adds a refund only where no refund of the tenant carries that id yet (and
 * refunds_one_per_provider_refund refuses a second), and only within what is left of the charge,
 * so refundedYen can never pass it. The order's row is locked first (the lock order of refundOrder's
 * transaction 1): two recorders of one order queue on it, and the second's statements see what the
 * first committed.
 */

/** What an order's refunds are recorded against: its row, locked. */
export interface LockedOrder {
  status: OrderStatus;
  paymentIntentId: string | null;
  chargedYen: number;
  refundedYen: number;
}

/** Locks the order's row for its refunds; undefined when there is no such order. */
export async function lockOrderForRefunds(trx: Transaction<DB>, tenantId: string, orderId: string): Promise<LockedOrder | undefined> {
  const { rows } = await sql<{ status: OrderStatus; payment_intent_id: string | null; charged_yen: number; refunded_yen: number }>`
    select status, payment_intent_id, charged_yen, refunded_yen from orders where tenant_id = ${tenantId} and id = ${orderId} for update`.execute(
    trx,
  );
  const row = rows[0];
  return row && { status: row.status, paymentIntentId: row.payment_intent_id, chargedYen: row.charged_yen, refundedYen: row.refunded_yen };
}

/** Whether a refund of the tenant already carries the provider's refund id. */
export async function isRecorded(trx: Transaction<DB>, tenantId: string, providerRefundId: string): Promise<boolean> {
  const { rows } = await sql`select 1 from refunds where tenant_id = ${tenantId} and provider_refund_id = ${providerRefundId}`.execute(trx);
  return rows.length > 0;
}

/**
 * The rest of a refund made, in the statement that records it (`made`, a statement returning the
 * refund's id, order_id, amount_yen, provider_refund_id and origin, or nothing): the order's
 * refundedYen grows by it, REFUNDED once it equals the charge (which gives the coupon back), one
 * `order.refunded` event. The order as it now stands; undefined when `made` recorded nothing.
 */
async function recordMade(trx: Transaction<DB>, tenantId: string, made: RawBuilder<unknown>): Promise<Order | undefined> {
  const result = await sql<OrderColumns>`
    with made as (${made}), refunded as (
      update orders o set refunded_yen = o.refunded_yen + made.amount_yen,
                          status = case when o.refunded_yen + made.amount_yen = o.charged_yen then 'REFUNDED' else o.status end
        from made
       where o.tenant_id = ${tenantId} and o.id = made.order_id
      returning o.*
    ), given_back as (
      update coupons c set redeemed_at = null
        from refunded r
       where r.status = 'REFUNDED' and c.tenant_id = r.tenant_id and c.id = r.coupon_id
    ), event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${ORDER_REFUNDED_TOPIC},
             jsonb_build_object('orderId', r.id, 'tenantId', ${tenantId}::text, 'refundId', m.id, 'providerRefundId', m.provider_refund_id,
                                'madeBy', m.origin, 'amountYen', m.amount_yen, 'refundedYen', r.refunded_yen, 'status', r.status,
                                'couponId', r.coupon_id)
        from refunded r, made m
    )
    select * from refunded`.execute(trx);
  const row = result.rows[0];
  return row ? toOrder(row) : undefined;
}

/** What is left of the charge takes `amount` (the order's row is locked: its refunded_yen is the last committed). */
const fits = (order: string, amount: RawBuilder<unknown> | number) =>
  sql`${sql.ref(`${order}.refunded_yen`)} + ${amount} <= ${sql.ref(`${order}.charged_yen`)}`;

/**
 * refundOrder's refund, made: recorded once, conditionally on its still being pending, on its
 * provider refund id being no other refund's, and on its fitting what is left of the charge.
 * Undefined when it recorded nothing.
 */
export function recordOwnRefundMade(
  trx: Transaction<DB>,
  refund: { tenantId: string; refundId: string; providerRefundId: string },
): Promise<Order | undefined> {
  const { tenantId, refundId, providerRefundId } = refund;
  return recordMade(
    trx,
    tenantId,
    sql`
      update refunds r set status = 'succeeded', provider_refund_id = ${providerRefundId}, settled_at = now(), last_error = null
        from orders o
       where r.tenant_id = ${tenantId} and r.id = ${refundId} and r.status = 'pending'
         and o.tenant_id = r.tenant_id and o.id = r.order_id and ${fits('o', sql.ref('r.amount_yen'))}
         and not exists (select 1 from refunds k where k.tenant_id = ${tenantId} and k.provider_refund_id = ${providerRefundId})
      returning r.id, r.order_id, r.amount_yen, r.provider_refund_id, r.origin`,
  );
}

/**
 * A refund made elsewhere (the dashboard, another client of the account), found at the provider:
 * a refund row of origin 'provider', settled, carrying the provider's id. Only for a PAID (or
 * REFUNDED) order, once, within what is left of the charge. Undefined when it recorded nothing.
 */
export function recordFoundRefund(
  trx: Transaction<DB>,
  refund: { tenantId: string; orderId: string; providerRefundId: string; amountYen: number },
): Promise<Order | undefined> {
  const { tenantId, orderId, providerRefundId, amountYen } = refund;
  return recordMade(
    trx,
    tenantId,
    sql`
      insert into refunds (tenant_id, id, order_id, origin, amount_yen, status, provider_refund_id, next_attempt_at, settled_at)
      select o.tenant_id, ${randomUUID()}, o.id, 'provider', ${amountYen}, 'succeeded', ${providerRefundId}, now(), now()
        from orders o
       where o.tenant_id = ${tenantId} and o.id = ${orderId} and o.status in ('PAID', 'REFUNDED') and ${fits('o', amountYen)}
         and not exists (select 1 from refunds k where k.tenant_id = ${tenantId} and k.provider_refund_id = ${providerRefundId})
      on conflict (tenant_id, provider_refund_id) where provider_refund_id is not null do nothing
      returning id, order_id, amount_yen, provider_refund_id, origin`,
  );
}
