import type { Transaction } from 'kysely';
import type { Clock } from '../../core/clock.js';
import { PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS, type AppConfig } from '../../core/config.js';
import { paymentsUnavailable } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { DB } from '../../db/schema.js';
import type { RunOptions, RunResult } from '../../db/transaction.js';
import type { AdmissionTurn } from '../coupons/coalescer.js';
import type { PaymentProvider } from '../payments/provider.js';
import { continuePayment, splitCheckout, type CheckoutAlgorithm, type CheckoutResult, type SettleDeps } from './flow.js';
import { currentOrder, type Order } from './orders.js';
import { loadPayment, type PaymentState } from './pending.js';
import type { ReconcileDeps, ReconcilePass } from './reconciler.js';
import { askAboutRefund, pendingRefund, recordRefundAnswer, type RefundReservation } from './refunds.js';
import type { CheckoutRequest, Reservation } from './reserve.js';
import type { PaymentWaitingRoom } from './waiting.js';
import type { WebhookDeps, WebhookResult } from './webhook.js';

/** The PAYMENTS_* limits a payment is asked for within. */
type PaymentLimits = Pick<AppConfig['payments'], 'timeoutMs' | 'reconcileForMs' | 'reconcileAfterMs' | 'actionTimeoutMs'>;

/** This process's parts a checkout runs with (buildServices hands them over). */
export interface CheckoutParts {
  /** Null when none is configured: every payment is then refused (PAYMENTS_UNAVAILABLE). */
  provider: PaymentProvider | null;
  limits: PaymentLimits;
  clock: Clock;
  /** Bounds the payments waiting on the provider (PAYMENTS_MAX_WAITING). */
  waiting: PaymentWaitingRoom;
  /** Told of every answer set aside (a metric). */
  refused(source: 'answer' | 'webhook'): void;
}

/**
 * Makes the steps a Checkout runs from its parts: the split design's ignore them; a naive twin of
 * test/naive/ that charges inside transaction 1 takes its provider from them.
 */
export type CheckoutSteps = (parts: CheckoutParts) => CheckoutAlgorithm;

/** The request's transaction runner: transaction 2 runs through it, under the request's deadline. */
interface RequestRunner {
  inTransaction<T>(options: RunOptions, work: (trx: Transaction<DB>) => Promise<T>): Promise<RunResult<T>>;
}

/** What the request hands a payment besides its input: plain values and its own runner and turn. */
export interface PaymentNeeds {
  /** Epoch ms: the request's deadline. */
  deadline: number;
  /** Given back while the provider answers. */
  turn: AdmissionTurn;
  database: RequestRunner;
  log: Logger;
}

/** Runs a mutation's unit of work once (runMutation: its transaction, its Idempotency-Key, its audit row), and tells whether it was replayed. */
type Commit<T> = () => Promise<{ value: T; replayed: boolean }>;

/** What confirmCheckout hands besides: the member's order it asks about. */
interface ConfirmNeeds extends PaymentNeeds {
  order: { tenantId: string; memberId: string; orderId: string };
}

/**
 * checkout, confirmCheckout and refundOrder, and the reconciler's and Stripe's webhooks' way to
 * the payments (docs/design.md §11). Each mutation's unit of work commits first (transaction 1),
 * then the provider is asked with no transaction, connection or admission turn held, and the answer
 * recorded in transaction 2. `steps` is the algorithm in use: the split design, or a naive twin of
 * test/naive/ handed to buildServices in its place (CheckoutSteps).
 *
 * @example const checkout = new Checkout({ provider, limits: config.payments, clock, waiting, refused }); await checkout.pay(commit, needs)
 */
export class Checkout {
  /** The algorithm in use. */
  readonly steps: CheckoutAlgorithm;

  constructor(
    readonly parts: CheckoutParts,
    stepsOf: CheckoutSteps = () => splitCheckout,
  ) {
    this.steps = stepsOf(parts);
  }

  /**
   * checkout's request for transaction 1: the member's input with the server's clock and the reconciler's first resend.
   *
   * @example checkout.requestOf({ tenantId, memberId, orderId, amountYen, couponId, paymentMethod })
   */
  requestOf(input: Omit<CheckoutRequest, 'now' | 'reconcileAfterMs'>): CheckoutRequest {
    return { ...input, now: this.parts.clock(), reconcileAfterMs: this.parts.limits.reconcileAfterMs };
  }

  /**
   * checkout's unit of work, transaction 1 (runMutation calls it): the reservation, as the algorithm in use makes it.
   *
   * @example await checkout.reserve(trx, checkout.requestOf(input))
   */
  readonly reserve = (trx: Transaction<DB>, request: CheckoutRequest): Promise<Reservation> => this.steps.reserve(trx, request);

  /**
   * checkout after its unit: a place in the waiting room before anything is written (a checkout
   * refused for want of one has written nothing), transaction 1 committed, then the payment.
   *
   * @example await checkout.pay(commit, { deadline, turn, database, log })
   */
  readonly pay = (commit: Commit<Reservation>, needs: PaymentNeeds): Promise<CheckoutResult> =>
    this.waitingFor(async () => {
      const run = await commit();
      return this.steps.settle(run.value, run.replayed, this.settleDeps(needs));
    });

  /**
   * confirmCheckout after its unit (which read the member's payment): the provider asked how it
   * stands, and its answer recorded; a resend reads the payment again.
   *
   * @example await checkout.confirm(commit, { deadline, turn, database, log, order: { tenantId, memberId, orderId } })
   */
  readonly confirm = (commit: Commit<PaymentState>, needs: ConfirmNeeds): Promise<CheckoutResult> =>
    this.waitingFor(async () => {
      const run = await commit();
      const deps = this.settleDeps(needs);
      const state = run.replayed ? await deps.inTransaction((trx) => loadPayment(trx, needs.order, deps.reconcileForMs)) : run.value;
      return continuePayment(state!, deps);
    });

  /**
   * refundOrder after its unit: the refund asked for with nothing held, and what the provider
   * answered recorded. A keyed resend asks again, with the refund's key, while it is pending and its
   * key young; otherwise (settled, or left to the reconciler) it answers the order as it stands.
   *
   * @example await checkout.refund(commit, { deadline, turn, database, log })
   */
  readonly refund = (commit: Commit<RefundReservation>, needs: PaymentNeeds): Promise<{ order: Order }> =>
    this.waitingFor(async () => {
      const run = await commit();
      return { order: await this.settleRefund(run.value, run.replayed, needs) };
    });

  /**
   * One pass of the reconciler over payments whose outcome is not known.
   *
   * @example await checkout.reconcile(reconcileDeps(services))
   */
  readonly reconcile = (deps: ReconcileDeps): Promise<ReconcilePass> => this.steps.reconcile(deps);

  /**
   * A delivery to POST /webhooks/stripe: its raw body and signature, judged and acted on.
   *
   * @example await checkout.webhook(deps, rawBody, request.headers.get('stripe-signature'))
   */
  readonly webhook = (deps: WebhookDeps, rawBody: Buffer, signature: string | null): Promise<WebhookResult> =>
    this.steps.webhook(deps, rawBody, signature);

  private provider(): PaymentProvider {
    if (this.parts.provider === null) throw paymentsUnavailable();
    return this.parts.provider;
  }

  /** Runs `work` with a place in the waiting room, given back whatever happens. */
  private async waitingFor<T>(work: () => Promise<T>): Promise<T> {
    const leave = this.parts.waiting.enter();
    try {
      return await work();
    } finally {
      leave();
    }
  }

  private settleDeps(needs: PaymentNeeds): SettleDeps {
    const { limits, clock, refused } = this.parts;
    const { deadline, turn, database, log } = needs;
    return {
      provider: this.provider(),
      timeoutMs: limits.timeoutMs,
      reconcileForMs: limits.reconcileForMs,
      actionTimeoutMs: limits.actionTimeoutMs,
      refused,
      deadline,
      inTransaction: async (work) => (await database.inTransaction({ deadline }, work)).value,
      stepOut: (wait) => turn.stepOut(wait),
      log,
      clock,
    };
  }

  private async settleRefund(reservation: RefundReservation, replayed: boolean, needs: PaymentNeeds): Promise<Order> {
    const { timeoutMs, reconcileForMs } = this.parts.limits;
    const { deadline, database } = needs;
    const inTransaction = async <T>(work: (trx: Transaction<DB>) => Promise<T>) => (await database.inTransaction({ deadline }, work)).value;
    const { refund } = reservation;
    const pending = await inTransaction((trx) => pendingRefund(trx, refund, reconcileForMs));
    const callMs = Math.min(timeoutMs, deadline - Date.now() - PAYMENT_RECORD_MARGIN_MS);
    if (pending === null || callMs < PAYMENT_CALL_MIN_MS || (replayed && !pending.keyYoung)) {
      return inTransaction((trx) => currentOrder(trx, refund.tenantId, refund.orderId));
    }
    const provider = this.provider();
    const { value: answer, back } = await needs.turn.stepOut(() => askAboutRefund(provider, refund, pending.keyYoung, callMs));
    if (!back) return reservation.order;
    return inTransaction((trx) => recordRefundAnswer(trx, refund, answer));
  }
}
