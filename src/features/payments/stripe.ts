import Stripe from 'stripe';
import { shortReason, type ChargeOutcome, type ChargeRequest, type PaymentProvider } from './provider.js';

export interface StripeOptions {
  secretKey: string;
  /** scheme://host[:port] of the API (STRIPE_API_URL). */
  apiUrl: string;
}

/**
 * The PaymentIntent a checkout creates and confirms in one call: the charged yen in JPY (a
 * zero-decimal currency: the amount is yen), the frontend's payment method, the order's id in the
 * metadata (what an operator searches the dashboard by), and no payment method that would redirect
 * the customer: the answer must be an outcome, not a step for a browser to take.
 */
export function paymentIntentParams(request: ChargeRequest): Stripe.PaymentIntentCreateParams {
  return {
    amount: request.amountYen,
    currency: 'jpy',
    confirm: true,
    payment_method: request.paymentMethod,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    // A card that asks for 3-D Secure is then a 402 card_error (authentication_required), an
    // outcome, instead of a 200 `requires_action` that only a browser could take further.
    error_on_requires_action: true,
    metadata: { order_id: request.orderId, tenant_id: request.tenantId },
  };
}

/** The client's own timer may be late by this much past the limit before the call is given up as unknown. */
const TIMER_MARGIN_MS = 50;

/**
 * Stripe's PaymentIntents through the official client. The client retries nothing
 * (maxNetworkRetries 0): whether and when a payment is asked again is the reconciler's decision.
 * One exception is the client's own: a connection closed before any answer is resent once, with
 * the same Idempotency-Key, which makes it harmless. Every call about one order carries the same
 * key, so Stripe makes one charge and answers its outcome to every resend.
 */
export function stripeProvider({ secretKey, apiUrl }: StripeOptions): PaymentProvider {
  const url = new URL(apiUrl);
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  const client = new Stripe(secretKey, {
    host: url.hostname,
    port: url.port === '' ? (protocol === 'http' ? 80 : 443) : Number(url.port),
    protocol,
    maxNetworkRetries: 0,
    telemetry: false,
    appInfo: { name: 'mutation-backend' },
  });
  return {
    name: url.origin === 'https://api.stripe.com' ? 'stripe' : `stripe at ${url.origin}`,
    async charge(request, timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<ChargeOutcome>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'unknown', reason: `no answer within ${timeoutMs} ms` }), timeoutMs + TIMER_MARGIN_MS);
      });
      const call = client.paymentIntents
        .create(paymentIntentParams(request), { idempotencyKey: request.idempotencyKey, timeout: timeoutMs })
        .then(outcomeOfIntent, outcomeOfError);
      try {
        return await Promise.race([call, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** A 200: paid only when the intent says `succeeded`; any other status settles nothing yet. */
function outcomeOfIntent(intent: Stripe.PaymentIntent): ChargeOutcome {
  if (intent.status === 'succeeded') return { kind: 'succeeded', intentId: intent.id };
  return { kind: 'unknown', reason: `payment intent ${intent.id} is ${intent.status}` };
}

/**
 * A 402 card_error is the decline. A 400 invalid_request_error (a payment method that does not
 * exist, an amount Stripe refuses) is refused for good: Stripe answers it again to every resend and
 * made no charge, so it settles the order as a decline with the error's code. A 400
 * idempotency_error is not: the key's first request may have charged. Everything else is not known.
 * The reason names the error's type, status and code, never its message or stack, which could carry
 * what the provider echoed back of the request.
 */
function outcomeOfError(error: unknown): ChargeOutcome {
  if (error instanceof Stripe.errors.StripeCardError) {
    return {
      kind: 'declined',
      intentId: error.payment_intent?.id ?? null,
      declineCode: error.decline_code ?? error.code ?? 'card_declined',
    };
  }
  if (error instanceof Stripe.errors.StripeInvalidRequestError && error.statusCode === 400) {
    return { kind: 'declined', intentId: error.payment_intent?.id ?? null, declineCode: error.code ?? 'invalid_request' };
  }
  if (error instanceof Stripe.errors.StripeConnectionError) {
    return { kind: 'unknown', reason: /timeout/i.test(error.message) ? 'timed out' : 'connection lost before an answer' };
  }
  if (error instanceof Stripe.errors.StripeError) {
    const parts = [error.type, error.statusCode === undefined ? null : `HTTP ${error.statusCode}`, error.code ?? null];
    return { kind: 'unknown', reason: shortReason(parts.filter(Boolean).join(' ')) };
  }
  return { kind: 'unknown', reason: error instanceof Error ? shortReason(error.name) : 'unexpected failure' };
}
