import type { Transaction } from 'kysely';
import type { Clock } from '../../core/clock.js';
import { PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS } from '../../core/config.js';
import type { DB } from '../../db/schema.js';
import type { Logger } from '../../core/logger.js';
import type { PaymentProvider } from '../payments/provider.js';
import type { Order } from './orders.js';
import { settleAnswer, type OutcomeDeps } from './outcome.js';
import { loadPayment, questionFor, reservedPayment, type PaymentState } from './pending.js';
import { reconcileOnce, type ReconcileDeps, type ReconcilePass } from './reconciler.js';
import { reserveOrder, type CheckoutRequest, type Reservation } from './reserve.js';
import { handleStripeEvent, type WebhookDeps, type WebhookResult } from './webhook.js';

type CheckoutStatus = 'PAID' | 'DECLINED' | 'PENDING' | 'REQUIRES_ACTION' | 'COUPON_UNAVAILABLE';

/** The answer of a checkout (and of confirmCheckout). PENDING is an answer, not an error: the outcome is not known yet. */
export interface CheckoutResult {
  status: CheckoutStatus;
  /** Null only for COUPON_UNAVAILABLE, which wrote nothing. */
  order: Order | null;
  /** The PaymentIntent's client secret, only with REQUIRES_ACTION: Stripe.js finishes the authentication with it. */
  clientSecret: string | null;
}

/** What the answer says of an order as it stands. */
export function resultOf(order: Order): CheckoutResult {
  const status = order.status === 'PENDING_PAYMENT' ? 'PENDING' : order.status === 'CANCELED' ? 'DECLINED' : 'PAID';
  return { status, order, clientSecret: null };
}

/** What the steps after transaction 1 use: none of them holds a connection or a turn while the provider answers. */
export interface SettleDeps {
  provider: PaymentProvider;
  /** PAYMENTS_TIMEOUT_MS. */
  timeoutMs: number;
  /** PAYMENTS_RECONCILE_FOR: an older payment is never created again, by a resend as by the reconciler. */
  reconcileForMs: number;
  /** PAYMENTS_ACTION_TIMEOUT_MS. */
  actionTimeoutMs: number;
  /** Epoch ms: the request's deadline. */
  deadline: number;
  /** A short transaction of its own (the runner, with the request's deadline). */
  inTransaction<T>(work: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /** Gives the operation's admission turn back while `wait` runs; `back` is false when no turn came back by the deadline. */
  stepOut<T>(wait: () => Promise<T>): Promise<{ value: T; back: boolean }>;
  /** Told of every answer set aside (a metric). */
  refused(source: 'answer' | 'webhook'): void;
  log: Logger;
  clock: Clock;
}

/**
 * How a checkout is carried out (the steps of checkout.ts's Checkout; buildServices takes a stand-in): transaction 1,
 * what follows it, the reconciler's pass and Stripe's webhooks. The naive twins of test/naive/ stand
 * in for it to show the tests fail.
 */
export interface CheckoutAlgorithm {
  readonly name: string;
  /** Transaction 1's work, inside the mutation's transaction. */
  reserve(trx: Transaction<DB>, request: CheckoutRequest): Promise<Reservation>;
  /** After transaction 1 committed (or was replayed): the provider, then transaction 2. */
  settle(reservation: Reservation, replayed: boolean, deps: SettleDeps): Promise<CheckoutResult>;
  /** One pass of the reconciler over payments whose outcome is not known. */
  reconcile(deps: ReconcileDeps): Promise<ReconcilePass>;
  /** A delivery to POST /webhooks/stripe: its raw body and signature, judged and acted on. */
  webhook(deps: WebhookDeps, rawBody: Buffer, signature: string | null): Promise<WebhookResult>;
}

/** The request's way of asking: each call in what is left of its deadline, its turn given back meanwhile. */
function requestOutcomeDeps(deps: SettleDeps, orderId: string): OutcomeDeps {
  const log = deps.log.child({ orderId });
  return {
    provider: deps.provider,
    inTransaction: deps.inTransaction,
    actionTimeoutMs: deps.actionTimeoutMs,
    countsFailures: false,
    onMismatch: 'set-aside',
    refused: deps.refused,
    log,
    clock: deps.clock,
    async ask(call) {
      const callMs = Math.min(deps.timeoutMs, deps.deadline - Date.now() - PAYMENT_RECORD_MARGIN_MS);
      if (callMs < PAYMENT_CALL_MIN_MS) {
        log.warn(
          { leftMs: deps.deadline - Date.now() },
          'payment: too little of the deadline left to ask the provider; the reconciler will',
        );
        return null;
      }
      const { value, back } = await deps.stepOut(() => call(callMs));
      if (!back) log.warn('payment: no turn came back to record the answer; the reconciler will ask again');
      return back ? value : null;
    },
  };
}

/**
 * Asks the provider about a pending payment and records what it says (outcome.ts): with the
 * create request while no PaymentIntent was named and its key is young, by the PaymentIntent's id
 * once one was. A settled order, a payment set aside, a payment whose key is too old to create again
 * (the reconciler searches for it), a call that no longer fits in the deadline and an unknown
 * outcome are answered as the order stands (PENDING for a pending one).
 */
export async function continuePayment(state: PaymentState, deps: SettleDeps): Promise<CheckoutResult> {
  const { order, payment } = state;
  if (payment === null || payment.setAside) return resultOf(order);
  const question = questionFor(deps.provider, payment);
  if (question === null) {
    deps.log.warn(
      { orderId: order.id },
      'payment: its key is older than PAYMENTS_RECONCILE_FOR and is not sent again; the reconciler searches',
    );
    return resultOf(order);
  }
  const outcomeDeps = requestOutcomeDeps(deps, order.id);
  const answer = await outcomeDeps.ask(question);
  if (answer === null) return resultOf(order);
  const settled = await settleAnswer(outcomeDeps, payment, answer);
  if (settled.requiresAction) return { status: 'REQUIRES_ACTION', order, clientSecret: settled.clientSecret };
  return resultOf(settled.order ?? order);
}

/**
 * After transaction 1: the payment is asked for with no transaction, no pool connection and no
 * admission turn held, then its outcome is recorded in transaction 2. A resend of the checkout
 * (the same Idempotency-Key, `replayed`) continues from what is committed: a settled order is
 * answered as it stands, a pending one is asked about again (continuePayment).
 */
export async function settleCheckout(reservation: Reservation, replayed: boolean, deps: SettleDeps): Promise<CheckoutResult> {
  if (reservation.status === 'COUPON_UNAVAILABLE') return { status: 'COUPON_UNAVAILABLE', order: null, clientSecret: null };
  if (reservation.status === 'PAID') return resultOf(reservation.order);
  const { tenantId } = reservation.payment;
  const where = { tenantId, orderId: reservation.order.id };
  const state = replayed
    ? await deps.inTransaction((trx) => loadPayment(trx, where, deps.reconcileForMs))
    : reservedPayment(reservation.order, reservation.payment);
  return continuePayment(state!, deps);
}

/** The design: reserve and commit, ask outside, record or compensate, reconcile what is left pending, act once on verified webhooks. */
export const splitCheckout: CheckoutAlgorithm = {
  name: 'split',
  reserve: (trx, request) => reserveOrder(trx, request),
  settle: settleCheckout,
  reconcile: (deps) => reconcileOnce(deps),
  webhook: handleStripeEvent,
};
