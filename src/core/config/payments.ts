import { z } from 'zod';
import { isHttpUrl } from '../http-url.js';
import { custom, duration, group, refuse, wholeNumber } from './kinds.js';

/** Stripe's API. */
const STRIPE_API_URL = 'https://api.stripe.com';

/**
 * Stripe keeps an idempotency key for at least 24 hours, then may prune it: a resend after that
 * could charge again. The reconciler stops resending an hour before.
 */
const RECONCILE_FOR_MAX_MS = 23 * 3_600_000;

/** Transaction 2 needs this much of a checkout's deadline after the call; the call is given the rest, up to PAYMENTS_TIMEOUT_MS. */
export const PAYMENT_RECORD_MARGIN_MS = 1_000;
/** Less than this left for the call: it is not sent, and the reconciler sends it. */
export const PAYMENT_CALL_MIN_MS = 200;

// The value itself never goes into a message: it is a secret.
const stripeSecretKey = z.string().regex(/^(sk|rk)_(test|live)_[A-Za-z0-9_]{1,240}$/, {
  error: 'expected a Stripe secret or restricted key (sk_live_…, sk_test_…, rk_live_…, rk_test_…)',
});

/** Stripe's webhook signing secret: `whsec_` and its key. */
const stripeWebhookSecret = z.string().regex(/^whsec_[A-Za-z0-9+/=_-]{16,}$/, {
  error: "expected the endpoint's signing secret from Stripe's dashboard or `stripe listen` (whsec_…)",
});

/** A scheme, a host and a port; the client adds Stripe's paths (/v1/…) itself. */
const stripeApiUrl = z.string().transform((raw, ctx) => {
  if (!isHttpUrl(raw)) return refuse(ctx, `expected an http:// or https:// URL, got "${raw}"`);
  const url = new URL(raw);
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    return refuse(ctx, `expected scheme://host[:port] with no path, query or credentials, got "${raw}"`);
  }
  return url.origin;
});

/** The payment provider of checkout (docs/design.md §11): Stripe's PaymentIntents, or a simulated one in development. */
export const paymentVariables = group('Payments', {
  secretKey: custom({
    name: 'STRIPE_SECRET_KEY',
    accepts: '`sk_live_…`, `sk_test_…`, `rk_live_…`, `rk_test_…`',
    schema: stripeSecretKey,
  }).describe(
    "Stripe's secret or restricted key for checkout's payments ([payments](#payments)); without it a development server uses " +
      'a simulated provider (`pm_card_visa` pays, `pm_card_chargeDeclined` is declined) and says so at start-up, and any other server ' +
      'says so at start-up and answers checkout `PAYMENTS_UNAVAILABLE`',
  ),
  apiUrl: custom({
    name: 'STRIPE_API_URL',
    accepts: '`scheme://host[:port]`, no path',
    default: STRIPE_API_URL,
    schema: stripeApiUrl,
  }).describe("where Stripe's API is: tests point it at a stub of their own"),
  webhookSecret: custom({
    name: 'STRIPE_WEBHOOK_SECRET',
    shown: '(none: `/webhooks/stripe` answers 404)',
    accepts: '`whsec_…`',
    schema: stripeWebhookSecret,
  }).describe(
    "the signing secret of the webhook endpoint in Stripe's dashboard (or of `stripe listen`): `POST /webhooks/stripe` verifies every event " +
      'with it and refuses the rest ([payments](#stripes-webhooks))',
  ),
  actionTimeoutMs: wholeNumber({ name: 'PAYMENTS_ACTION_TIMEOUT_MS', default: 900_000, min: 1_000, max: 86_400_000 }).describe(
    'how long a customer has to finish an authentication (3-D Secure); then the reconciler cancels the payment at Stripe and records ' +
      'what Stripe answers: the order `CANCELED` and its coupon given back, or `PAID` when the customer finished in time',
  ),
  // Its default follows REQUEST_DEADLINE_MS, which it must fit (src/core/config.ts).
  timeoutMs: wholeNumber({
    name: 'PAYMENTS_TIMEOUT_MS',
    shown: '5000 (at most half of `REQUEST_DEADLINE_MS`)',
    min: PAYMENT_CALL_MIN_MS,
    max: 60_000,
  }).describe(
    'one call to the payment provider; no answer by then is `PENDING` (not an error) and the reconciler settles it. ' +
      `At least ${PAYMENT_RECORD_MARGIN_MS} below \`REQUEST_DEADLINE_MS\`, so that the outcome is recorded in the same request (refused at start-up otherwise)`,
  ),
  reconcileAfterMs: wholeNumber({ name: 'PAYMENTS_RECONCILE_AFTER_MS', default: 60_000, min: 100, max: 3_600_000 }).describe(
    'a payment whose outcome is not known this long after its order is resent by the reconciler (the same request, the same `Idempotency-Key`); ' +
      'each later resend waits twice as long, at most an hour',
  ),
  reconcileIntervalMs: wholeNumber({ name: 'PAYMENTS_RECONCILE_INTERVAL_MS', default: 5_000, min: 10, max: 600_000 }).describe(
    'pause between reconciler passes when nothing is due',
  ),
  reconcileForMs: duration({
    name: 'PAYMENTS_RECONCILE_FOR',
    default: RECONCILE_FOR_MAX_MS,
    min: 1_000,
    max: RECONCILE_FOR_MAX_MS,
  }).describe(
    'how long after its order a payment that never named a PaymentIntent may be sent its create request again (the same key); after that ' +
      'the reconciler searches Stripe by `metadata[order_id]` and never creates it: Stripe keeps an idempotency key for 24 hours, and a create ' +
      'after it could charge again. A payment that named its PaymentIntent is looked up by its id at any age',
  ),
  maxWaiting: wholeNumber({ name: 'PAYMENTS_MAX_WAITING', default: 256, min: 1, max: 100_000 }).describe(
    'checkouts of one HTTP process waiting on the payment provider at once (they hold no turn and no connection meanwhile); ' +
      'more are answered `TRY_AGAIN` (`reason: payments busy`) before anything is written',
  ),
});
