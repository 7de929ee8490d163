import type { Transaction } from 'kysely';
import type { Clock } from '../../core/clock.js';
import { TryAgainError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { DB } from '../../db/schema.js';
import { SqlState, sqlStateOf } from '../../db/sqlstate.js';
import type { PaymentAnswer, PaymentProvider, ReportedIntent } from '../payments/provider.js';
import type { Order } from './orders.js';
import { recordDeclined, recordLearned, recordNoOutcome, recordPaid, recordRequiresAction, setPaymentAside } from './record.js';
import { clientSecretOf, failureCodeOf, intentMismatch } from './verify.js';

/**
 * From what the provider answered to what is recorded (docs/design.md §11): the one place every
 * source of an outcome goes through (the checkout's answer, a resend, confirmCheckout, a webhook,
 * the reconciler, the abandonment of an authentication), so that any order of arrival and any
 * number of repeats settle once, through the conditional statements of record.ts.
 *
 * - A PaymentIntent is believed only once it matches its payment (verify.ts). One that does not,
 *   and an answer this server refuses to read, settle nothing: the payment is set aside for an
 *   operator and logged once (a webhook's disagreement is logged and left: the event is Stripe's
 *   word about a payment, not this server's question).
 * - `succeeded` is PAID; `canceled` is CANCELED with the provider's code; `requires_action` waits on
 *   the customer and answers the client secret; `requires_payment_method` (a decline, a failed
 *   authentication) is canceled at the provider first, because a PaymentIntent the customer still
 *   holds the secret of could succeed later for an order that is closed, and what the cancel
 *   answers settles it (it may have succeeded meanwhile); anything else settles nothing yet.
 * - No call is made with a transaction, a pool connection or an admission turn held: `ask` is how
 *   the caller gives its turn back around the call.
 */

/** A pending payment as the steps after transaction 1 know it. */
export interface PaymentInHand {
  tenantId: string;
  orderId: string;
  amountYen: number;
  /** The PaymentIntent an earlier answer named; null while none did. */
  intentId: string | null;
}

export interface OutcomeDeps {
  provider: PaymentProvider;
  /** A short transaction of its own. */
  inTransaction<T>(work: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /**
   * Makes one call to the provider with nothing held, given the time it may take; null when there
   * is no time left for it or no turn came back to record its answer.
   */
  ask<T>(call: (timeoutMs: number) => Promise<T>): Promise<T | null>;
  /** PAYMENTS_ACTION_TIMEOUT_MS. */
  actionTimeoutMs: number;
  /** The reconciler counts answers that fail the same way; a request leaves that to it. */
  countsFailures: boolean;
  /** `set-aside` for the answers to this server's own calls; `log` for a webhook's. */
  onMismatch: 'set-aside' | 'log';
  /** Told of every payment set aside and every disagreeing PaymentIntent (a metric). */
  refused(source: 'answer' | 'webhook'): void;
  log: Logger;
  clock: Clock;
}

/** What the steps came to: the order as it stands, and whether it waits on its customer (with the secret they need). */
export interface Settlement {
  order: Order | null;
  requiresAction: boolean;
  clientSecret: string | null;
}

const pending = (order: Order | null = null): Settlement => ({ order, requiresAction: false, clientSecret: null });

/** The cancel's key: one per order, so that every cancel of its PaymentIntent is one request at the provider. */
export const cancelKeyOf = (orderId: string) => `cancel-${orderId}`;

/** A transaction of the deps, or null when it could not commit (TRY_AGAIN): the next asker records it. */
async function record<T>(deps: OutcomeDeps, payment: PaymentInHand, work: (trx: Transaction<DB>) => Promise<T>): Promise<T | null> {
  try {
    return await deps.inTransaction(work);
  } catch (error) {
    if (!(error instanceof TryAgainError)) throw error;
    deps.log.warn(
      { orderId: payment.orderId, reason: error.reason },
      'payment: the outcome could not be recorded; it is asked again later',
    );
    return null;
  }
}

async function setAside(deps: OutcomeDeps, payment: PaymentInHand, reason: string): Promise<Settlement> {
  const set = await record(deps, payment, (trx) => setPaymentAside(trx, { ...payment, reason }));
  if (set) {
    deps.refused('answer');
    deps.log.error(
      { orderId: payment.orderId, tenantId: payment.tenantId, reason },
      'payment set aside: the provider answered what does not match its order; nothing is settled from it and it is asked no more ' +
        '(npm run reconcile lists it)',
    );
  }
  return pending();
}

async function noOutcome(deps: OutcomeDeps, payment: PaymentInHand, reason: string): Promise<Settlement> {
  deps.log.warn({ orderId: payment.orderId, reason }, 'payment: the provider gave no outcome; it is asked again later');
  if (!deps.countsFailures) return pending();
  const setNow = await record(deps, payment, (trx) => recordNoOutcome(trx, { ...payment, reason }));
  if (setNow) deps.log.error({ orderId: payment.orderId, reason }, 'payment set aside: every answer failed the same way');
  return pending();
}

async function paid(deps: OutcomeDeps, payment: PaymentInHand, intentId: string): Promise<Settlement> {
  try {
    return pending(await record(deps, payment, (trx) => recordPaid(trx, { ...payment, intentId, now: deps.clock() })));
  } catch (error) {
    if (sqlStateOf(error) !== SqlState.uniqueViolation) throw error;
    return deps.onMismatch === 'set-aside' ? setAside(deps, payment, `${intentId} settles another order`) : pending();
  }
}

const declined = async (deps: OutcomeDeps, payment: PaymentInHand, intentId: string | null, failureCode: string) =>
  pending(await record(deps, payment, (trx) => recordDeclined(trx, { ...payment, intentId, failureCode, now: deps.clock() })));

/** Cancels the PaymentIntent at the provider and settles by its answer: canceled, or what it was instead. */
async function cancelThenSettle(deps: OutcomeDeps, payment: PaymentInHand, intentId: string, failureCode: string | null) {
  const answer = await deps.ask((timeoutMs) => deps.provider.cancel(intentId, cancelKeyOf(payment.orderId), timeoutMs));
  if (answer === null) return pending();
  // Canceling again is never the answer to a cancel: a PaymentIntent still open after it waits for the next asker.
  return settleAnswer(deps, { ...payment, intentId }, answer, { failureCode, cancelled: true });
}

async function settleIntent(deps: OutcomeDeps, payment: PaymentInHand, intent: ReportedIntent & { id: string }, carried: Carried) {
  const failureCode = failureCodeOf(intent.failureCode) ?? carried.failureCode;
  const note = { tenantId: payment.tenantId, orderId: payment.orderId, intentId: intent.id };
  switch (intent.status) {
    case 'succeeded':
      return paid(deps, payment, intent.id);
    case 'canceled':
      return declined(deps, payment, intent.id, failureCode ?? 'canceled');
    case 'requires_action':
      await record(deps, payment, (trx) => recordRequiresAction(trx, { ...note, actionTimeoutMs: deps.actionTimeoutMs }));
      return { order: null, requiresAction: true, clientSecret: clientSecretOf(intent) };
  }
  // Still open after a cancel: the next asker cancels again.
  if (intent.status === 'requires_payment_method' && !carried.cancelled) return cancelThenSettle(deps, payment, intent.id, failureCode);
  await record(deps, payment, (trx) => recordLearned(trx, { ...note, providerStatus: String(intent.status) }));
  return noOutcome(deps, { ...payment, intentId: intent.id }, `payment intent is ${String(intent.status).slice(0, 40)}`);
}

interface Carried {
  /** A failure code an earlier answer of the same payment gave (a decline before its cancel). */
  failureCode: string | null;
  /** The answer is a cancel's. */
  cancelled: boolean;
}

/**
 * Settles what one answer says of a pending payment, through the conditional statements: the
 * first outcome recorded wins, whoever records it. Never throws for what the provider said.
 */
export async function settleAnswer(
  deps: OutcomeDeps,
  payment: PaymentInHand,
  answer: PaymentAnswer,
  carried: Carried = { failureCode: null, cancelled: false },
): Promise<Settlement> {
  switch (answer.kind) {
    case 'unknown':
      return noOutcome(deps, payment, answer.reason);
    case 'refused':
      return setAside(deps, payment, answer.reason);
    case 'declined':
      return declined(deps, payment, null, failureCodeOf(answer.failureCode) ?? 'declined');
  }
  const mismatch = intentMismatch(answer.intent, payment);
  if (mismatch !== null) {
    if (deps.onMismatch === 'set-aside') return setAside(deps, payment, `the PaymentIntent does not match: ${mismatch}`);
    deps.refused('webhook');
    deps.log.warn({ orderId: payment.orderId, mismatch }, 'payment: a PaymentIntent that does not match its order settles nothing');
    return pending();
  }
  const failureCode = failureCodeOf(answer.failureCode) ?? carried.failureCode;
  return settleIntent(deps, payment, answer.intent as ReportedIntent & { id: string }, { ...carried, failureCode });
}
