import { sql, type Transaction } from 'kysely';
import { COUPON_REDEEMED_TOPIC } from '../coupons/redeem.js';
import type { DB } from '../../db/schema.js';
import { shortReason } from '../payments/provider.js';
import { currentOrder, ORDER_CANCELED_TOPIC, ORDER_PAID_TOPIC, orderPayload, toOrder, type Order, type OrderColumns } from './orders.js';

/**
 * Transaction 2 of a checkout: the outcome, recorded by whoever learnt it first (the request, a
 * resend of it, confirmCheckout, a webhook, the reconciler, the abandonment of an authentication).
 * Every write is conditional on the order still being PENDING_PAYMENT, and the order's row is
 * updated first: two writers queue on its lock, and the second re-checks the status against the
 * first one's commit, updates nothing and answers the order as the first left it. So the first
 * writer wins and nobody overwrites an outcome. Lock order: the order's row, then the coupon's,
 * then the payment intent's (transaction 1 takes the coupon's before it inserts the order, which
 * no other transaction can reach until it commits). The statements that only note what the
 * provider said of a pending payment touch the payment intent's row alone.
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
  /** The provider's decline_code or code (or why the payment was given up). */
  failureCode: string;
  now: Date;
}

/**
 * Paid: the order PAID, its coupon redeemed (no longer held), the intent succeeded, an `order.paid`
 * event and, with a coupon, its `coupon.redeemed` event, in one statement. A PaymentIntent that
 * settles another order of the tenant already fails orders_one_payment_intent (23505): the caller
 * sets the payment aside.
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
      update payment_intents set status = 'succeeded', provider_intent_id = ${intentId}, provider_status = 'succeeded',
                                 settled_at = now(), last_error = null, set_aside_at = null
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
 * Declined, the compensation: the order CANCELED with its failure code, its coupon given back (no
 * longer held), the intent declined, an `order.canceled` event, in one statement. Callers make sure
 * first that no charge stands: a PaymentIntent that could still succeed is canceled at the provider
 * before this runs (src/features/checkout/outcome.ts).
 */
export async function recordDeclined(trx: Transaction<DB>, outcome: DeclinedOutcome): Promise<Order> {
  const { tenantId, orderId, intentId, now } = outcome;
  const failureCode = shortReason(outcome.failureCode);
  const result = await sql<OrderColumns>`
    with canceled as (
      update orders set status = 'CANCELED', payment_intent_id = ${intentId}, failure_code = ${failureCode}, settled_at = ${now}
       where tenant_id = ${tenantId} and id = ${orderId} and status = 'PENDING_PAYMENT'
      returning *
    ), released as (
      update coupons c set held_by_order_id = null
        from canceled
       where c.tenant_id = canceled.tenant_id and c.id = canceled.coupon_id and c.held_by_order_id = canceled.id
    ), intent as (
      update payment_intents set status = 'declined', provider_intent_id = coalesce(${intentId}, provider_intent_id),
                                 decline_code = ${failureCode}, settled_at = now(), last_error = null, set_aside_at = null
       where tenant_id = ${tenantId} and order_id = ${orderId} and exists (select 1 from canceled)
    ), order_event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${ORDER_CANCELED_TOPIC}, ${orderPayload('canceled', tenantId)} || jsonb_build_object('declineCode', ${failureCode}::text)
        from canceled
    )
    select * from canceled`.execute(trx);
  const row = result.rows[0];
  return row ? toOrder(row) : currentOrder(trx, tenantId, orderId);
}

/** Where a pending payment is noted: its order, and what it learned. */
export interface PendingNote {
  tenantId: string;
  orderId: string;
}

/**
 * The PaymentIntent asks for authentication (3-D Secure): its id is kept (from now on the payment
 * is looked up by it, never created again), the time it first asked (PAYMENTS_ACTION_TIMEOUT_MS
 * counts from then), and the reconciler's next look no later than that timeout's end.
 */
export async function recordRequiresAction(
  trx: Transaction<DB>,
  note: PendingNote & { intentId: string; actionTimeoutMs: number },
): Promise<void> {
  await sql`
    update payment_intents
       set provider_intent_id = ${note.intentId}, provider_status = 'requires_action', action_since = coalesce(action_since, now()),
           next_attempt_at = least(next_attempt_at, coalesce(action_since, now()) + make_interval(secs => ${note.actionTimeoutMs / 1000})),
           last_error = null, same_failures = 0
     where tenant_id = ${note.tenantId} and order_id = ${note.orderId} and status = 'pending'
       and (provider_intent_id is null or provider_intent_id = ${note.intentId})`.execute(trx);
}

/** The provider named the PaymentIntent and its status, which settles nothing yet (processing, …): the id is kept. */
export async function recordLearned(trx: Transaction<DB>, note: PendingNote & { intentId: string; providerStatus: string }): Promise<void> {
  await sql`
    update payment_intents set provider_intent_id = ${note.intentId}, provider_status = ${note.providerStatus.slice(0, 64)}
     where tenant_id = ${note.tenantId} and order_id = ${note.orderId} and status = 'pending'
       and (provider_intent_id is null or provider_intent_id = ${note.intentId})`.execute(trx);
}

/** Answers in a row that fail the same way before the payment is set aside: about a day of the reconciler's backoff. */
export const SAME_FAILURES_SET_ASIDE = 24;

/**
 * Sets a pending payment aside for an operator: nothing asks the provider about it any more. True
 * only for the statement that set it aside, so that it is logged once.
 */
export async function setPaymentAside(trx: Transaction<DB>, note: PendingNote & { reason: string }): Promise<boolean> {
  const set = await sql`
    update payment_intents set set_aside_at = now(), last_error = ${shortReason(note.reason)}
     where tenant_id = ${note.tenantId} and order_id = ${note.orderId} and status = 'pending' and set_aside_at is null
    returning 1`.execute(trx);
  return set.rows.length > 0;
}

/**
 * The reconciler asked and got no outcome: the reason is kept, and the payment is set aside once
 * SAME_FAILURES_SET_ASIDE answers in a row failed the same way (a provider that always answers
 * what this server refuses is not asked forever). True when this set it aside.
 */
export async function recordNoOutcome(trx: Transaction<DB>, note: PendingNote & { reason: string }): Promise<boolean> {
  const reason = shortReason(note.reason);
  const noted = await sql<{ set_aside: boolean }>`
    update payment_intents
       set same_failures = case when last_error = ${reason} then same_failures + 1 else 1 end,
           last_error = ${reason},
           set_aside_at = case when last_error = ${reason} and same_failures + 1 >= ${SAME_FAILURES_SET_ASIDE} then now() end
     where tenant_id = ${note.tenantId} and order_id = ${note.orderId} and status = 'pending' and set_aside_at is null
    returning set_aside_at is not null as set_aside`.execute(trx);
  return noted.rows[0]?.set_aside === true;
}

/** What an operator found at the provider for a payment set aside or never answered (npm run reconcile -- --settle). */
export type OperatorFinding = { kind: 'paid'; intentId: string } | { kind: 'canceled' };

/** The failure code an order canceled by an operator carries: no charge was found at the provider. */
export const OPERATOR_CANCELED = 'operator_found_no_charge';

/**
 * Settles a pending payment by what an operator found in the provider's dashboard (a succeeded
 * PaymentIntent for the order's metadata order_id, or none), through the same statements as
 * transaction 2: the first writer still wins, so an order settled meanwhile is answered as it is.
 */
export function recordOperatorFinding(trx: Transaction<DB>, tenantId: string, orderId: string, finding: OperatorFinding, now: Date) {
  if (finding.kind === 'paid') return recordPaid(trx, { tenantId, orderId, intentId: finding.intentId, now });
  return recordDeclined(trx, { tenantId, orderId, intentId: null, failureCode: OPERATOR_CANCELED, now });
}
