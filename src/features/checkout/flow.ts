import { sql, type Transaction } from 'kysely';
import type { Clock } from '../../core/clock.js';
import { PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS } from '../../core/config.js';
import type { DB } from '../../db/schema.js';
import { TryAgainError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { ChargeRequest, PaymentProvider } from '../payments/provider.js';
import { toOrder, type Order } from './orders.js';
import { reconcileOnce, type ReconcileDeps, type ReconcilePass } from './reconciler.js';
import { recordOutcome } from './record.js';
import { reserveOrder, type CheckoutRequest, type Reservation } from './reserve.js';

export type CheckoutStatus = 'PAID' | 'DECLINED' | 'PENDING' | 'COUPON_UNAVAILABLE';

/** The answer of a checkout. PENDING is an answer, not an error: the outcome is not known yet. */
export interface CheckoutResult {
  status: CheckoutStatus;
  /** Null only for COUPON_UNAVAILABLE, which wrote nothing. */
  order: Order | null;
}

/** What the answer says of an order as it stands. */
export function resultOf(order: Order): CheckoutResult {
  const status = order.status === 'PAID' ? 'PAID' : order.status === 'CANCELED' ? 'DECLINED' : 'PENDING';
  return { status, order };
}

export interface ReserveDeps {
  provider: PaymentProvider;
  timeoutMs: number;
}

/** What the steps after transaction 1 use: none of them holds a connection or a turn while the provider answers. */
export interface SettleDeps {
  provider: PaymentProvider;
  /** PAYMENTS_TIMEOUT_MS. */
  timeoutMs: number;
  /** PAYMENTS_RECONCILE_FOR: an older payment is not asked again, by a resend as by the reconciler. */
  reconcileForMs: number;
  /** Epoch ms: the request's deadline. */
  deadline: number;
  /** A short transaction of its own (the runner, with the request's deadline). */
  inTransaction<T>(work: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /** Gives the operation's admission turn back while `wait` runs; `back` is false when no turn came back by the deadline. */
  stepOut<T>(wait: () => Promise<T>): Promise<{ value: T; back: boolean }>;
  log: Logger;
  clock: Clock;
}

/**
 * How a checkout is carried out (AppServices.algorithms): transaction 1, what follows it, and the
 * reconciler's pass. The naive twins of test/naive/ stand in for it to show the tests fail.
 */
export interface CheckoutAlgorithm {
  readonly name: string;
  /** Transaction 1's work, inside the mutation's transaction. */
  reserve(trx: Transaction<DB>, request: CheckoutRequest, deps: ReserveDeps): Promise<Reservation>;
  /** After transaction 1 committed (or was replayed): the provider, then transaction 2. */
  settle(reservation: Reservation, replayed: boolean, deps: SettleDeps): Promise<CheckoutResult>;
  /** One pass of the reconciler over payments whose outcome is not known. */
  reconcile(deps: ReconcileDeps): Promise<ReconcilePass>;
}

/** A pending order and its payment, as committed: what a resend of the checkout continues from. */
async function pendingPayment(
  trx: Transaction<DB>,
  tenantId: string,
  orderId: string,
  reconcileForMs: number,
): Promise<{ order: Order; payment: ChargeRequest | null; tooOld: boolean }> {
  const row = await trx
    .selectFrom('orders as o')
    .leftJoin('payment_intents as p', (join) => join.onRef('p.tenant_id', '=', 'o.tenant_id').onRef('p.order_id', '=', 'o.id'))
    .selectAll('o')
    .select(['p.idempotency_key', 'p.amount_yen as intent_amount_yen', 'p.payment_method', 'p.status as intent_status'])
    // The reconciler's own limit (reconciler.ts), read on the database's clock as it reads it.
    .select(sql<boolean>`p.created_at <= now() - make_interval(secs => ${reconcileForMs / 1000})`.as('too_old'))
    .where('o.tenant_id', '=', tenantId)
    .where('o.id', '=', orderId)
    .executeTakeFirstOrThrow();
  const order = toOrder(row);
  const pending = order.status === 'PENDING_PAYMENT' && row.intent_status === 'pending';
  return {
    order,
    tooOld: row.too_old === true,
    payment: pending
      ? { idempotencyKey: row.idempotency_key!, tenantId, orderId, amountYen: row.intent_amount_yen!, paymentMethod: row.payment_method! }
      : null,
  };
}

/**
 * After transaction 1: the payment is asked for with no transaction, no pool connection and no
 * admission turn held, then its outcome is recorded in transaction 2. A resend of the checkout
 * (the same Idempotency-Key, `replayed`) continues from what is committed: a settled order is
 * answered as it stands, a pending one asks the provider again with the same request and key, so
 * the charge is the first one's. An unknown outcome, a call that no longer fits in the deadline, a
 * turn that did not come back or a transaction 2 that could not commit answers PENDING: the order
 * stays PENDING_PAYMENT and the reconciler settles it. A resend of a payment older than
 * PAYMENTS_RECONCILE_FOR asks nobody, as the reconciler would not.
 */
export async function settleCheckout(reservation: Reservation, replayed: boolean, deps: SettleDeps): Promise<CheckoutResult> {
  if (reservation.status === 'COUPON_UNAVAILABLE') return { status: 'COUPON_UNAVAILABLE', order: null };
  if (reservation.status === 'PAID') return resultOf(reservation.order);
  const { tenantId } = reservation.payment;
  const { order, payment, tooOld } = replayed
    ? await deps.inTransaction((trx) => pendingPayment(trx, tenantId, reservation.order.id, deps.reconcileForMs))
    : { ...reservation, tooOld: false };
  if (payment === null) return resultOf(order);
  const log = deps.log.child({ orderId: order.id });
  if (tooOld) {
    // The provider may have forgotten the key by now (Stripe keeps keys 24 hours): a resend could
    // be a second charge. The order waits for an operator (npm run reconcile lists it).
    log.warn('checkout: a resend of a payment older than PAYMENTS_RECONCILE_FOR is not sent again; the order stays pending');
    return resultOf(order);
  }
  const callMs = Math.min(deps.timeoutMs, deps.deadline - Date.now() - PAYMENT_RECORD_MARGIN_MS);
  if (callMs < PAYMENT_CALL_MIN_MS) {
    log.warn(
      { leftMs: deps.deadline - Date.now() },
      'checkout: too little of the deadline left to ask the payment provider; the reconciler will',
    );
    return resultOf(order);
  }
  const { value: outcome, back } = await deps.stepOut(() => deps.provider.charge(payment, callMs));
  if (outcome.kind === 'unknown') {
    log.warn({ reason: outcome.reason }, 'checkout: the payment provider gave no outcome; the order stays pending for the reconciler');
    return resultOf(order);
  }
  if (!back) {
    log.warn({ outcome: outcome.kind }, 'checkout: no turn came back to record the outcome; the reconciler will');
    return resultOf(order);
  }
  try {
    const recorded = await deps.inTransaction((trx) => recordOutcome(trx, tenantId, order.id, outcome, deps.clock()));
    return resultOf(recorded);
  } catch (error) {
    if (!(error instanceof TryAgainError)) throw error;
    log.warn({ outcome: outcome.kind, reason: error.reason }, 'checkout: the outcome could not be recorded; the reconciler will');
    return resultOf(order);
  }
}

/** What transaction 1 runs with besides its request: the checkout algorithm in use and what its reserve needs. */
export interface ReserveWith {
  algorithm: CheckoutAlgorithm;
  deps: ReserveDeps;
}

/** checkout's unit of work, transaction 1 (runMutation calls it): the reservation, as the algorithm in use makes it. */
export function reserveCheckout(
  trx: Transaction<DB>,
  request: CheckoutRequest,
  _bookkeeping: unknown,
  { algorithm, deps }: ReserveWith,
): Promise<Reservation> {
  return algorithm.reserve(trx, request, deps);
}

/** The design: reserve and commit, ask outside, record or compensate, reconcile what is left pending. */
export const splitCheckout: CheckoutAlgorithm = {
  name: 'split',
  reserve: (trx, request) => reserveOrder(trx, request),
  settle: settleCheckout,
  reconcile: reconcileOnce,
};
