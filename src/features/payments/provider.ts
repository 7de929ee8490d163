/**
 * The payment provider as checkout sees it (docs/design.md §11): one call that confirms a payment
 * for an order, and the three things its answer can mean. Stripe's PaymentIntents speak it in
 * production (stripe.ts); a simulated provider speaks it in development without a key
 * (simulated.ts).
 */

/** One payment, the same on every call about one order: a resend is this request again. */
export interface ChargeRequest {
  /** Sent as Idempotency-Key: the provider makes at most one charge for it and answers its outcome again. */
  idempotencyKey: string;
  tenantId: string;
  orderId: string;
  /** Whole yen, above 0. */
  amountYen: number;
  /** The payment method the frontend got from Stripe.js (pm_…). */
  paymentMethod: string;
}

/**
 * What a call came to. Only `succeeded` and `declined` are outcomes; `unknown` is everything else
 * (a timeout, a reset, a 5xx, a 409 while the first request is in flight, another status), after
 * which nothing may be assumed: the charge may or may not have been made.
 */
export type ChargeOutcome =
  | { kind: 'succeeded'; intentId: string }
  | { kind: 'declined'; intentId: string | null; declineCode: string }
  | { kind: 'unknown'; reason: string };

export interface PaymentProvider {
  /** How the start-up message and the metrics name it. */
  readonly name: string;
  /**
   * Confirms the payment, waiting at most `timeoutMs`. Never throws for what the provider or the
   * network did: a failure is an `unknown` outcome whose reason carries no secret and no stack.
   */
  charge(request: ChargeRequest, timeoutMs: number): Promise<ChargeOutcome>;
}

/**
 * Stripe's smallest charge in JPY (its "Minimum and maximum charge amounts": ¥50). A smaller one is a
 * 400 that no resend changes, so checkout refuses it before anything is written.
 */
export const MINIMUM_CHARGE_YEN = 50;

/** A reason short enough for a log field and the intent's last_error. */
export function shortReason(reason: string): string {
  return reason.replace(/\s+/g, ' ').slice(0, 200);
}
