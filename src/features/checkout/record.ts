import { sql, type Transaction } from 'kysely';
import { COUPON_REDEEMED_TOPIC } from '../coupons/redeem.js';
import type { DB } from '../../db/schema.js';
import { shortReason, type ChargeOutcome } from '../payments/provider.js';
import { currentOrder, ORDER_CANCELED_TOPIC, ORDER_PAID_TOPIC, orderPayload, toOrder, type Order, type OrderColumns } from './orders.js';

/**
 * Transaction 2 of a checkout: the outcome, recorded by whoever learnt it first (the request, a
 * resend of it, the reconciler). Every write is conditional on the order still being
 * PENDING_PAYMENT, and the order's row is updated first: two writers queue on its lock, and the
 * second re-checks the status against the first one's commit, updates nothing and answers the
 * order as the first left it. So the first writer wins and nobody overwrites an outcome. Lock
 * order: the order's row, then the coupon's, then the payment intent's (transaction 1 takes the
 * coupon's before it inserts the order, which no other transaction can reach until it commits).
 */

export interface PaidOutcome {
  tenantId: string;
  orderId: string;
  /** The provider's PaymentIntent; null for an order with nothing to charge. */
  intentId: string | null;
  now: Date;
}

export interface DeclinedOutcome {
  tenantId: string;
  orderId: string;
  intentId: string | null;
  declineCode: string;
  now: Date;
}

/**
 * Paid: the order PAID, its coupon redeemed (no longer held), the intent succeeded, an `order.paid`
 * event and, with a coupon, its `coupon.redeemed` event, in one statement.
 */
export async function recordPaid(trx: Transaction<DB>, { tenantId, orderId, intentId, now }: PaidOutcome): Promise<Order> {
  const result = await sql<OrderColumns>`
    with paid as (
      update orders set status = 'PAID', payment_intent_id = ${intentId}, settled_at = ${now}
       where tenant_id = ${tenantId} and id = ${orderId} and status = 'PENDING_PAYMENT'
      returning *
    ), redeemed as (
      update coupons c set redeemed_at = ${now}, held_by_order_id = null
        from paid
       where c.tenant_id = paid.tenant_id and c.id = paid.coupon_id and c.held_by_order_id = paid.id
      returning c.id, c.campaign_id, c.member_id, c.amount_yen
    ), intent as (
      update payment_intents set status = 'succeeded', provider_intent_id = ${intentId}, settled_at = now(), last_error = null
       where tenant_id = ${tenantId} and order_id = ${orderId} and exists (select 1 from paid)
    ), order_event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${ORDER_PAID_TOPIC}, ${orderPayload('paid', tenantId)} from paid
    ), coupon_event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${COUPON_REDEEMED_TOPIC},
             jsonb_build_object('couponId', r.id, 'tenantId', ${tenantId}::text, 'campaignId', r.campaign_id, 'memberId', r.member_id,
                                'amountYen', r.amount_yen, 'redeemedAt', ${now.toISOString()}::text, 'orderId', ${orderId}::text)
        from redeemed r
    )
    select * from paid`.execute(trx);
  const row = result.rows[0];
  return row ? toOrder(row) : currentOrder(trx, tenantId, orderId);
}

/**
 * Declined, the compensation: the order CANCELED, its coupon given back (no longer held), the
 * intent declined with the provider's code, an `order.canceled` event, in one statement.
 */
export async function recordDeclined(trx: Transaction<DB>, outcome: DeclinedOutcome): Promise<Order> {
  const { tenantId, orderId, intentId, now } = outcome;
  const declineCode = shortReason(outcome.declineCode);
  const result = await sql<OrderColumns>`
    with canceled as (
      update orders set status = 'CANCELED', payment_intent_id = ${intentId}, settled_at = ${now}
       where tenant_id = ${tenantId} and id = ${orderId} and status = 'PENDING_PAYMENT'
      returning *
    ), released as (
      update coupons c set held_by_order_id = null
        from canceled
       where c.tenant_id = canceled.tenant_id and c.id = canceled.coupon_id and c.held_by_order_id = canceled.id
    ), intent as (
      update payment_intents set status = 'declined', provider_intent_id = ${intentId}, decline_code = ${declineCode},
                                 settled_at = now(), last_error = null
       where tenant_id = ${tenantId} and order_id = ${orderId} and exists (select 1 from canceled)
    ), order_event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${ORDER_CANCELED_TOPIC}, ${orderPayload('canceled', tenantId)} || jsonb_build_object('declineCode', ${declineCode}::text)
        from canceled
    )
    select * from canceled`.execute(trx);
  const row = result.rows[0];
  return row ? toOrder(row) : currentOrder(trx, tenantId, orderId);
}

/** What a call told: an outcome to record (an unknown one records nothing; the reconciler finds the payment when it is due). */
export type KnownOutcome = Exclude<ChargeOutcome, { kind: 'unknown' }>;

/** Transaction 2's statement for a known outcome: paid, or declined and compensated (first writer wins). */
export function recordOutcome(trx: Transaction<DB>, tenantId: string, orderId: string, outcome: KnownOutcome, now: Date): Promise<Order> {
  if (outcome.kind === 'succeeded') return recordPaid(trx, { tenantId, orderId, intentId: outcome.intentId, now });
  return recordDeclined(trx, { tenantId, orderId, intentId: outcome.intentId, declineCode: outcome.declineCode, now });
}

/** What an operator found at the provider for a payment nobody resends any more (npm run reconcile -- --settle). */
export type OperatorFinding = { kind: 'paid'; intentId: string } | { kind: 'canceled' };

/** The decline code an order canceled by an operator carries: no charge was found at the provider. */
export const OPERATOR_CANCELED = 'operator_found_no_charge';

/**
 * Settles a pending payment by what an operator found in the provider's dashboard (a succeeded
 * PaymentIntent for the order's metadata order_id, or none), through the same statements as
 * transaction 2: the first writer still wins, so an order settled meanwhile is answered as it is.
 */
export function recordOperatorFinding(trx: Transaction<DB>, tenantId: string, orderId: string, finding: OperatorFinding, now: Date) {
  const outcome: KnownOutcome =
    finding.kind === 'paid'
      ? { kind: 'succeeded', intentId: finding.intentId }
      : { kind: 'declined', intentId: null, declineCode: OPERATOR_CANCELED };
  return recordOutcome(trx, tenantId, orderId, outcome, now);
}
