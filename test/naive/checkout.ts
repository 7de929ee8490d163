import { sql } from 'kysely';
import Stripe from 'stripe';
import { resultOf, settleCheckout, splitCheckout, type CheckoutAlgorithm } from '../../src/features/checkout/flow.js';
import type { CheckoutParts, CheckoutSteps } from '../../src/features/checkout/checkout.js';
import { cancelKeyOf } from '../../src/features/checkout/outcome.js';
import { reconcileOnce, SPLIT_STEPS, type ReconcileSteps } from '../../src/features/checkout/reconciler.js';
import { recordDeclined, recordPaid } from '../../src/features/checkout/record.js';
import { reserveOrder } from '../../src/features/checkout/reserve.js';
import { actOnEvent } from '../../src/features/checkout/webhook.js';
import type { PaymentProvider } from '../../src/features/payments/provider.js';
import { settleAnswer } from '../../src/features/checkout/outcome.js';

/**
 * The checkouts a newcomer writes first, kept to prove the tests can fail (docs/design.md §10).
 */

/**
 * The charge inside transaction 1: reserve, call the provider, record the outcome, commit. It
 * holds a pool connection, a turn and the coupon's row lock for the whole call; and a lost answer
 * (or a process killed during the call) rolls the order back while the charge stands at the
 * provider: a charge without its order.
 */
export const chargeInsideTransaction = ({ provider, limits }: CheckoutParts): CheckoutAlgorithm => ({
  name: 'charge inside transaction 1',
  async reserve(trx, request) {
    const reservation = await reserveOrder(trx, request);
    if (reservation.status !== 'RESERVED') return reservation;
    const answer = await provider!.charge(reservation.payment, limits.timeoutMs);
    const { tenantId, orderId, now } = request;
    if (answer.kind === 'intent' && answer.intent.status === 'succeeded' && answer.intent.id !== null) {
      return { status: 'PAID', order: await recordPaid(trx, { tenantId, orderId, intentId: answer.intent.id, now }) };
    }
    if (answer.kind === 'declined' || answer.kind === 'intent') {
      const failureCode = answer.failureCode ?? 'declined';
      return { status: 'PAID', order: await recordDeclined(trx, { tenantId, orderId, intentId: null, failureCode, now }) };
    }
    throw new Error(`the payment's outcome is not known (${answer.reason})`);
  },
  settle: async (reservation) =>
    reservation.status === 'COUPON_UNAVAILABLE'
      ? { status: 'COUPON_UNAVAILABLE', order: null, clientSecret: null }
      : resultOf(reservation.order),
  reconcile: splitCheckout.reconcile,
  webhook: splitCheckout.webhook,
});

/** A provider whose unknown outcomes are read as declines: what "no answer means no payment" looks like. */
function unknownAsDeclined(provider: PaymentProvider): PaymentProvider {
  return {
    ...provider,
    async charge(request, timeoutMs) {
      const answer = await provider.charge(request, timeoutMs);
      return answer.kind === 'unknown' ? { kind: 'declined', failureCode: 'assumed_declined' } : answer;
    },
  };
}

/**
 * Compensates on a lost answer: a timeout, a reset or a 502 is taken for a decline, the order
 * canceled and the coupon given back, although the charge may have been made.
 */
export const lostAnswerIsDecline: CheckoutAlgorithm = {
  name: 'a lost answer is a decline',
  reserve: splitCheckout.reserve,
  settle: (reservation, replayed, deps) => settleCheckout(reservation, replayed, { ...deps, provider: unknownAsDeclined(deps.provider) }),
  reconcile: (deps) => splitCheckout.reconcile({ ...deps, provider: unknownAsDeclined(deps.provider) }),
  webhook: splitCheckout.webhook,
};

/** The split design without its reconciler: what a lost answer or a crash leaves pending stays pending, its coupon held. */
export const noReconciler: CheckoutAlgorithm = {
  name: 'no reconciler',
  reserve: splitCheckout.reserve,
  settle: splitCheckout.settle,
  reconcile: async () => ({ resent: 0, paid: 0, declined: 0, unknown: 0, unsettled: 0, refunds: 0, foundRefunds: 0 }),
  webhook: splitCheckout.webhook,
};

/**
 * Settles from the webhook's body as it came: no signature is checked, so anyone who can reach
 * the endpoint can pay an order with a forged `payment_intent.succeeded`.
 */
export const unverifiedWebhook: CheckoutAlgorithm = {
  ...splitCheckout,
  name: 'a webhook settled from its unverified body',
  webhook: (deps, rawBody) => actOnEvent(deps, JSON.parse(rawBody.toString('utf8')) as Stripe.Event),
};

/**
 * Gives up an abandoned authentication by canceling at Stripe without reading the answer: a
 * customer who finished at the last second has paid, and the order is canceled all the same.
 */
export const cancelWithoutReading: CheckoutAlgorithm = {
  ...splitCheckout,
  name: 'a timeout that cancels without reading the answer',
  reconcile: (deps) =>
    reconcileOnce(deps, {
      ...SPLIT_STEPS,
      async abandon(outcome, payment) {
        await outcome.provider.cancel(payment.intentId!, cancelKeyOf(payment.orderId), deps.options.timeoutMs);
        return settleAnswer(outcome, payment, { kind: 'declined', failureCode: 'abandoned' });
      },
    } satisfies ReconcileSteps),
};

/**
 * Resends the create request whatever the key's age: after Stripe forgot the key (24 hours) the
 * same request is a new PaymentIntent, and a second charge.
 */
export const recreateAfterKeyLifetime: CheckoutAlgorithm = {
  ...splitCheckout,
  name: 'a reconciler that creates again after 24 hours',
  reconcile: (deps) =>
    reconcileOnce(deps, {
      ...SPLIT_STEPS,
      ask: (outcome, payment) => SPLIT_STEPS.ask(outcome, { ...payment, keyYoung: true }),
    }),
};

/**
 * Counts refunds from the charge.refunded event's body, as it came: the order's refundedYen set to
 * the charge's amount_refunded and one order.refunded event per delivery, with no list asked for
 * and no refund recorded by its id. A repeated delivery is another event, and an older event
 * delivered after a newer one sets refundedYen back.
 */
export const refundsFromEventBody: CheckoutAlgorithm = {
  ...splitCheckout,
  name: "refunds counted from the event's charge",
  async webhook(deps, rawBody, signature) {
    let event: Stripe.Event;
    try {
      event = Stripe.webhooks.constructEvent(rawBody, signature ?? '', deps.secret ?? '');
    } catch {
      return { status: 400, body: { message: 'the Stripe-Signature does not verify' } };
    }
    if (event.type.startsWith('refund.')) return { status: 200, body: { received: true } };
    if (event.type !== 'charge.refunded') return splitCheckout.webhook(deps, rawBody, signature);
    const charge = event.data.object as { payment_intent: string; amount_refunded: number };
    await deps.inTransaction((trx) =>
      sql`with refunded as (
            update orders set refunded_yen = ${charge.amount_refunded},
                              status = case when ${charge.amount_refunded} = charged_yen then 'REFUNDED' else 'PAID' end
             where payment_intent_id = ${charge.payment_intent} returning *
          ), given_back as (
            update coupons c set redeemed_at = null from refunded r where r.status = 'REFUNDED' and c.tenant_id = r.tenant_id and c.id = r.coupon_id
          )
          insert into outbox_events (tenant_id, topic, payload)
          select tenant_id, 'order.refunded', jsonb_build_object('orderId', id, 'amountYen', refunded_yen) from refunded`.execute(trx),
    );
    return { status: 200, body: { received: true } };
  },
};

/** The design without its sweep over the account's refunds: a refund whose events were lost is never learnt of. */
export const noRefundSweep: CheckoutAlgorithm = {
  ...splitCheckout,
  name: 'no sweep of the refunds',
  reconcile: (deps) => reconcileOnce(deps, { ...SPLIT_STEPS, sweepRefunds: async () => 0 }),
};

/** The twins by the name CHECKOUT_ALGORITHM gives them (test/support/checkout-server.ts), as buildServices takes them. */
export const NAIVE_CHECKOUTS: Record<string, CheckoutSteps> = {
  'charge-inside': chargeInsideTransaction,
  'lost-is-decline': () => lostAnswerIsDecline,
  'no-reconciler': () => noReconciler,
  'unverified-webhook': () => unverifiedWebhook,
  'cancel-without-reading': () => cancelWithoutReading,
  'recreate-after-24h': () => recreateAfterKeyLifetime,
  'refunds-from-event-body': () => refundsFromEventBody,
  'no-refund-sweep': () => noRefundSweep,
};
