import { resultOf, settleCheckout, splitCheckout, type CheckoutAlgorithm } from '../../src/features/checkout/flow.js';
import { recordOutcome } from '../../src/features/checkout/record.js';
import { reserveOrder } from '../../src/features/checkout/reserve.js';
import type { PaymentProvider } from '../../src/features/payments/provider.js';

/**
 * The checkouts a newcomer writes first, kept to prove the tests can fail (docs/design.md §10).
 */

/**
 * The charge inside transaction 1: reserve, call the provider, record the outcome, commit. It
 * holds a pool connection, a turn and the coupon's row lock for the whole call; and a lost answer
 * (or a process killed during the call) rolls the order back while the charge stands at the
 * provider: a charge without its order.
 */
export const chargeInsideTransaction: CheckoutAlgorithm = {
  name: 'charge inside transaction 1',
  async reserve(trx, request, { provider, timeoutMs }) {
    const reservation = await reserveOrder(trx, request);
    if (reservation.status !== 'RESERVED') return reservation;
    const outcome = await provider.charge(reservation.payment, timeoutMs);
    if (outcome.kind === 'unknown') throw new Error(`the payment's outcome is not known (${outcome.reason})`);
    return { status: 'PAID', order: await recordOutcome(trx, request.tenantId, request.orderId, outcome, request.now) };
  },
  settle: async (reservation) =>
    reservation.status === 'COUPON_UNAVAILABLE' ? { status: 'COUPON_UNAVAILABLE', order: null } : resultOf(reservation.order),
  reconcile: splitCheckout.reconcile,
};

/** A provider whose unknown outcomes are read as declines: what "no answer means no payment" looks like. */
function unknownAsDeclined(provider: PaymentProvider): PaymentProvider {
  return {
    name: provider.name,
    async charge(request, timeoutMs) {
      const outcome = await provider.charge(request, timeoutMs);
      return outcome.kind === 'unknown' ? { kind: 'declined', intentId: null, declineCode: `assumed: ${outcome.reason}` } : outcome;
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
};

/** The split design without its reconciler: what a lost answer or a crash leaves pending stays pending, its coupon held. */
export const noReconciler: CheckoutAlgorithm = {
  name: 'no reconciler',
  reserve: splitCheckout.reserve,
  settle: splitCheckout.settle,
  reconcile: async () => ({ resent: 0, paid: 0, declined: 0, unknown: 0, unsettled: 0 }),
};

export const NAIVE_CHECKOUTS: Record<string, CheckoutAlgorithm> = {
  'charge-inside': chargeInsideTransaction,
  'lost-is-decline': lostAnswerIsDecline,
  'no-reconciler': noReconciler,
};
