import { sql, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { RollbackAndReturn } from '../../db/transaction.js';
import { badInput } from '../../core/errors.js';
import { MINIMUM_CHARGE_YEN, type ChargeRequest } from '../payments/provider.js';
import { ORDER_CREATED_TOPIC, orderPayload, toOrder, type Order, type OrderColumns } from './orders.js';
import { chargeRequestOf } from './pending.js';
import { recordPaid } from './record.js';
import { couponExpired } from '../coupons/member-coupons.js';

export interface CheckoutRequest {
  tenantId: string;
  /** The session's member: only the coupon's owner spends it. */
  memberId: string;
  /** Made by the caller, so that the coupon can be held for it in the statement that holds it. */
  orderId: string;
  amountYen: number;
  couponId: string | null;
  paymentMethod: string;
  /** From the server's clock: the order's createdAt, and a coupon's redeemedAt. */
  now: Date;
  /** When the reconciler may first resend the payment (PAYMENTS_RECONCILE_AFTER_MS). */
  reconcileAfterMs: number;
}

/**
 * What transaction 1 committed. `RESERVED`: the order waits for its payment, which `payment`
 * describes (the same request on every call). `PAID`: nothing was left to charge. Or the coupon
 * could not be had, and nothing was written. It is the mutation's stored response: a resend with
 * the same Idempotency-Key finds the same order.
 */
export type Reservation =
  { status: 'RESERVED'; order: Order; payment: ChargeRequest } | { status: 'PAID'; order: Order } | { status: 'COUPON_UNAVAILABLE' };

/** What checkout's audit row names: the order and its coupon, or nothing when nothing was written. */
export const reservationEntities = (reservation: Reservation): string[] =>
  reservation.status === 'COUPON_UNAVAILABLE'
    ? []
    : [reservation.order.id, ...(reservation.order.couponId ? [reservation.order.couponId] : [])];

/** Thrown inside transaction 1, so that the coupon's hold rolls back with everything else. */
const belowMinimumCharge = (amountYen: number, discountYen: number, chargedYen: number) =>
  badInput(
    `amountYen ${amountYen} less the coupon's ${discountYen} leaves ${chargedYen} yen to charge; the payment provider charges ` +
      `${MINIMUM_CHARGE_YEN} yen at least: pay ${MINIMUM_CHARGE_YEN - chargedYen} yen more, or without the coupon`,
    'amountYen',
  );

const couponUnavailable = () => new RollbackAndReturn<Reservation>({ status: 'COUPON_UNAVAILABLE' });

/**
 * Transaction 1 of a checkout (docs/design.md §11): reserves what the outcome needs and nothing
 * more, with no call to anyone. Lock order: the Idempotency-Key (runMutation's claim, first), then
 * the coupon's row, then the new rows (order, payment intent, outbox), which nothing else can
 * reach before the commit.
 *
 * The coupon is held in one conditional UPDATE (`held_by_order_id is null and redeemed_at is null
 * and voided_at is null`), which decides and writes on the coupon's own row: two checkouts with one
 * coupon, or a checkout and a redeem, queue on its row lock and the second re-checks against the
 * first one's commit. A coupon held by another order, redeemed, voided, expired (its campaign's
 * couponsExpireAt passed on the database's clock; one held before that stays good for its order),
 * another member's or none at all is COUPON_UNAVAILABLE, and everything rolls back (RollbackAndReturn); so does a charge
 * below the provider's minimum, a BAD_USER_INPUT error. An order with
 * nothing to charge (the coupon covers the amount) is paid here: no provider, no intent.
 */
export async function reserveOrder(trx: Transaction<DB>, request: CheckoutRequest): Promise<Reservation> {
  const { tenantId, memberId, orderId, amountYen, couponId, now } = request;
  let discountYen = 0;
  if (couponId !== null) {
    const held = await sql<{ amount_yen: number }>`
      update coupons set held_by_order_id = ${orderId}
       where tenant_id = ${tenantId} and id = ${couponId} and member_id = ${memberId}
         and held_by_order_id is null and redeemed_at is null and voided_at is null and not ${couponExpired('coupons')}
      returning amount_yen`.execute(trx);
    const coupon = held.rows[0];
    if (!coupon) throw couponUnavailable();
    discountYen = coupon.amount_yen;
  }
  const chargedYen = Math.max(amountYen - discountYen, 0);
  if (chargedYen > 0 && chargedYen < MINIMUM_CHARGE_YEN) throw belowMinimumCharge(amountYen, discountYen, chargedYen);
  const payment = chargeRequestOf({
    tenantId,
    orderId,
    amountYen: chargedYen,
    paymentMethod: request.paymentMethod,
  });
  const inserted = await sql<OrderColumns>`
    with placed as (
      insert into orders (tenant_id, id, member_id, status, amount_yen, discount_yen, charged_yen, coupon_id, created_at)
      values (${tenantId}, ${orderId}, ${memberId}, 'PENDING_PAYMENT', ${amountYen}, ${discountYen}, ${chargedYen}, ${couponId}, ${now})
      returning *
    ), intent as (
      insert into payment_intents (tenant_id, order_id, idempotency_key, amount_yen, payment_method, next_attempt_at)
      select tenant_id, id, ${payment.idempotencyKey}, charged_yen, ${payment.paymentMethod},
             now() + make_interval(secs => ${request.reconcileAfterMs / 1000})
        from placed where charged_yen > 0
    ), event as (
      insert into outbox_events (tenant_id, topic, payload)
      select ${tenantId}, ${ORDER_CREATED_TOPIC}, ${orderPayload('placed', tenantId)} from placed
    )
    select * from placed`.execute(trx);
  const order = toOrder(inserted.rows[0]!);
  if (chargedYen > 0) return { status: 'RESERVED', order, payment };
  return { status: 'PAID', order: await recordPaid(trx, { tenantId, orderId, intentId: null, now }) };
}
