import { sql, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { notFound } from '../../core/errors.js';
import type { ChargeRequest, PaymentAnswer, PaymentProvider } from '../payments/provider.js';
import { toOrder, type Order } from './orders.js';
import type { PaymentInHand } from './outcome.js';

/** The key every call about the order sends: Stripe keeps idempotency keys per account, and the order's id is unique in it. */
const paymentKeyOf = (orderId: string) => `checkout-${orderId}`;

/**
 * The charge request of an order's payment, the same on every call about it: made by transaction 1
 * from the order (its key made here), and again from the payment's row (with the key it stored) by
 * every later step.
 *
 * @example chargeRequestOf({ tenantId, orderId, amountYen: 1200, paymentMethod: 'pm_card_visa' })
 */
export const chargeRequestOf = (payment: Omit<ChargeRequest, 'idempotencyKey'> & { idempotencyKey?: string }): ChargeRequest => ({
  idempotencyKey: payment.idempotencyKey ?? paymentKeyOf(payment.orderId),
  tenantId: payment.tenantId,
  orderId: payment.orderId,
  amountYen: payment.amountYen,
  paymentMethod: payment.paymentMethod,
});

/** A payment whose outcome is not known, as committed: what every step about it starts from. */
export interface PendingPayment extends PaymentInHand {
  /** The create request, the same on every call (its key included). */
  request: ChargeRequest;
  /**
   * Whether the create request may still be sent: its key is younger than PAYMENTS_RECONCILE_FOR,
   * below the 24 hours Stripe keeps a key (a create after that could be a second charge).
   */
  keyYoung: boolean;
  /** Set aside for an operator: nobody asks the provider about it any more. */
  setAside: boolean;
}

/** An order as committed, and its payment while the outcome is not known (null once settled, or with nothing to charge). */
export interface PaymentState {
  order: Order;
  payment: PendingPayment | null;
}

/** Reads an order and its pending payment; a member (`memberId`) reads only its own. Null when there is no such order. */
export async function loadPayment(
  trx: Transaction<DB>,
  where: { tenantId: string; orderId: string; memberId?: string },
  reconcileForMs: number,
): Promise<PaymentState | null> {
  let query = trx
    .selectFrom('orders as o')
    .leftJoin('payment_intents as p', (join) => join.onRef('p.tenant_id', '=', 'o.tenant_id').onRef('p.order_id', '=', 'o.id'))
    .selectAll('o')
    .select(['p.idempotency_key', 'p.amount_yen as intent_amount_yen', 'p.payment_method', 'p.status as intent_status'])
    .select(['p.provider_intent_id', 'p.set_aside_at'])
    // The reconciler's own limit (reconciler.ts), read on the database's clock as it reads it.
    .select(sql<boolean>`p.created_at > now() - make_interval(secs => ${reconcileForMs / 1000})`.as('key_young'))
    .where('o.tenant_id', '=', where.tenantId)
    .where('o.id', '=', where.orderId);
  if (where.memberId !== undefined) query = query.where('o.member_id', '=', where.memberId);
  const row = await query.executeTakeFirst();
  if (!row) return null;
  const order = toOrder(row);
  if (order.status !== 'PENDING_PAYMENT' || row.intent_status !== 'pending') return { order, payment: null };
  const request = chargeRequestOf({
    idempotencyKey: row.idempotency_key!,
    tenantId: where.tenantId,
    orderId: order.id,
    amountYen: row.intent_amount_yen!,
    paymentMethod: row.payment_method!,
  });
  return {
    order,
    payment: {
      tenantId: where.tenantId,
      orderId: order.id,
      amountYen: request.amountYen,
      intentId: row.provider_intent_id,
      request,
      keyYoung: row.key_young === true,
      setAside: row.set_aside_at !== null,
    },
  };
}

/** confirmCheckout's unit of work: the member's own order and its payment, or NOT_FOUND. */
export async function findOwnPayment(
  trx: Transaction<DB>,
  input: { tenantId: string; memberId: string; orderId: string; reconcileForMs: number },
): Promise<PaymentState> {
  const state = await loadPayment(trx, input, input.reconcileForMs);
  if (state === null) throw notFound('Order');
  return state;
}

/** What confirmCheckout's audit row names: the order. */
export const paymentEntities = (state: PaymentState): string[] => [state.order.id];

/** A payment just reserved by transaction 1: nothing asked yet. */
export const reservedPayment = (order: Order, request: ChargeRequest): PaymentState => ({
  order,
  payment: {
    tenantId: request.tenantId,
    orderId: order.id,
    amountYen: request.amountYen,
    intentId: null,
    request,
    keyYoung: true,
    setAside: false,
  },
});

/**
 * The question to ask the provider about a pending payment (docs/design.md §11, "ask, do not
 * replay"): once a PaymentIntent was named, it is looked up by its id; the create request is sent
 * again only while none was and its key is young enough; past that, null: the reconciler finds it
 * by its order's id and never creates it.
 */
export function questionFor(provider: PaymentProvider, payment: PendingPayment): ((timeoutMs: number) => Promise<PaymentAnswer>) | null {
  if (payment.intentId !== null) return (timeoutMs) => provider.lookUp(payment.intentId!, timeoutMs);
  if (payment.keyYoung) return (timeoutMs) => provider.charge(payment.request, timeoutMs);
  return null;
}
