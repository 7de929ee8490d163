import { randomBytes } from 'node:crypto';
import type { ChargeOutcome, PaymentProvider } from './provider.js';

/** Stripe's test payment methods the simulated provider knows, and what each does. */
export const SIMULATED_PAYMENT_METHODS: Readonly<Record<string, 'succeeds' | string>> = {
  pm_card_visa: 'succeeds',
  pm_card_mastercard: 'succeeds',
  pm_card_jp: 'succeeds',
  pm_card_chargeDeclined: 'generic_decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
  pm_card_chargeDeclinedExpiredCard: 'expired_card',
};

/** Keys remembered at most; the oldest are forgotten first (a development server runs for hours, not months). */
const KEYS_KEPT = 100_000;

/**
 * The payment provider of a development server without STRIPE_SECRET_KEY: Stripe's test payment
 * methods behave as in Stripe's test mode (`pm_card_visa` pays, `pm_card_chargeDeclined` is
 * declined, an unknown method is declined as `invalid_payment_method`), and a key sent again
 * answers its first outcome, as Stripe's idempotency does. Its memory is this process's.
 */
export function simulatedProvider(): PaymentProvider {
  const outcomes = new Map<string, ChargeOutcome>();
  return {
    name: 'simulated',
    charge(request) {
      const known = outcomes.get(request.idempotencyKey);
      if (known) return Promise.resolve(known);
      const intentId = `pi_sim_${randomBytes(12).toString('hex')}`;
      const behaviour = SIMULATED_PAYMENT_METHODS[request.paymentMethod];
      const outcome: ChargeOutcome =
        behaviour === 'succeeds'
          ? { kind: 'succeeded', intentId }
          : { kind: 'declined', intentId, declineCode: behaviour ?? 'invalid_payment_method' };
      if (outcomes.size >= KEYS_KEPT) outcomes.delete(outcomes.keys().next().value!);
      outcomes.set(request.idempotencyKey, outcome);
      return Promise.resolve(outcome);
    },
  };
}
