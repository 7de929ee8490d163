import Stripe from 'stripe';
import { ANSWER_TOO_LARGE, BoundedHttpClient } from './bounded-http.js';
import {
  MAX_ANSWER_BYTES,
  MAX_REFUND_PAGES,
  shortReason,
  type ChargeRequest,
  type PaymentAnswer,
  type PaymentProvider,
  type RefundAnswer,
  type RefundListAnswer,
  type ReportedIntent,
  type ReportedRefund,
} from './provider.js';

export interface StripeOptions {
  secretKey: string;
  /** scheme://host[:port] of the API (STRIPE_API_URL). */
  apiUrl: string;
}

/**
 * The PaymentIntent a checkout creates and confirms in one call: the charged yen in JPY (a
 * zero-decimal currency: the amount is yen), the frontend's payment method, the order's id and
 * tenant in the metadata (what an answer is checked against, and what an operator or the reconciler
 * searches by), and no payment method that would redirect the customer away. A card that asks for
 * 3-D Secure answers `requires_action`: the customer's browser finishes it with the client secret.
 */
function paymentIntentParams(request: ChargeRequest): Stripe.PaymentIntentCreateParams {
  return {
    amount: request.amountYen,
    currency: 'jpy',
    confirm: true,
    payment_method: request.paymentMethod,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    metadata: { order_id: request.orderId, tenant_id: request.tenantId },
  };
}

const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);
const whole = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);
const record = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};

/** A PaymentIntent as received, nothing assumed of its shape. */
export function reportedIntent(raw: unknown): ReportedIntent {
  const intent = record(raw);
  const metadata = record(intent['metadata']);
  const error = record(intent['last_payment_error']);
  return {
    id: text(intent['id']),
    status: text(intent['status']),
    amount: whole(intent['amount']),
    currency: text(intent['currency']),
    orderId: text(metadata['order_id']),
    tenantId: text(metadata['tenant_id']),
    clientSecret: text(intent['client_secret']),
    failureCode: text(error['decline_code']) ?? text(error['code']) ?? text(intent['cancellation_reason']),
  };
}

/** A refund as received; its PaymentIntent is an id, or the object itself where the list expanded it. */
function reportedRefund(raw: unknown): ReportedRefund {
  const refund = record(raw);
  const intent = refund['payment_intent'];
  const expanded = intent !== null && typeof intent === 'object';
  return {
    id: text(refund['id']),
    status: text(refund['status']),
    amount: whole(refund['amount']),
    paymentIntentId: expanded ? text(record(intent)['id']) : text(intent),
    refundId: text(record(refund['metadata'])['refund_id']),
    failureCode: text(refund['failure_reason']),
    created: whole(refund['created']),
    intent: expanded ? reportedIntent(intent) : null,
  };
}

/** Why a call gave no outcome: the error's type, status and code, never its message or stack (which could echo the request). */
function failureOf(error: unknown): { kind: 'unknown' | 'refused'; reason: string } {
  if (error instanceof Stripe.errors.StripeConnectionError) {
    const detail = record(error.detail);
    if (detail['code'] === ANSWER_TOO_LARGE) return { kind: 'refused', reason: `answer over ${MAX_ANSWER_BYTES} bytes` };
    return { kind: 'unknown', reason: /timeout/i.test(error.message) ? 'timed out' : 'connection lost before an answer' };
  }
  if (error instanceof Stripe.errors.StripeError) {
    const parts = [error.rawType ?? error.type, error.statusCode === undefined ? null : `HTTP ${error.statusCode}`, error.code ?? null];
    return { kind: 'unknown', reason: shortReason(parts.filter(Boolean).join(' ')) };
  }
  return { kind: 'unknown', reason: error instanceof Error ? shortReason(error.name) : 'unexpected failure' };
}

/**
 * An error that carries the PaymentIntent (a 402 decline, a 400 to a cancel of one that succeeded
 * or was canceled) describes it; a 402 or a 400 invalid_request_error without one (a payment method
 * Stripe does not have, an amount it refuses) is refused for good: every resend gets it again and no
 * charge was made. A 400 idempotency_error is not: the key's first request may have charged.
 */
function answerOfError(error: unknown): PaymentAnswer {
  if (error instanceof Stripe.errors.StripeError && !(error instanceof Stripe.errors.StripeIdempotencyError)) {
    const failureCode = error.decline_code ?? error.code ?? null;
    if (error.payment_intent) return { kind: 'intent', intent: reportedIntent(error.payment_intent), failureCode };
    const forGood =
      error instanceof Stripe.errors.StripeCardError ||
      (error instanceof Stripe.errors.StripeInvalidRequestError && error.statusCode === 400);
    if (forGood) return { kind: 'declined', failureCode: failureCode ?? 'card_declined' };
  }
  return failureOf(error);
}

function answerOfRefundError(error: unknown): RefundAnswer {
  if (error instanceof Stripe.errors.StripeInvalidRequestError && error.statusCode === 400) {
    return { kind: 'rejected', failureCode: error.code ?? 'invalid_request' };
  }
  return failureOf(error);
}

const intentAnswer = (raw: unknown): PaymentAnswer => ({ kind: 'intent', intent: reportedIntent(raw), failureCode: null });

/** Stripe's search syntax quotes with single quotes; an order id is a UUID, so nothing needs escaping. */
const orderQuery = (orderId: string) => `metadata['order_id']:'${orderId}'`;

/**
 * Stripe's PaymentIntents and Refunds through the official client, over BoundedHttpClient: every
 * answer bounded in bytes and every call in time. The client retries nothing (maxNetworkRetries 0):
 * whether and when a payment is asked again is the reconciler's decision. One exception is the
 * client's own: a connection closed before any answer is resent once, with the same
 * Idempotency-Key, which makes it harmless. Every call about one payment carries the same key.
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
    httpClient: new BoundedHttpClient(MAX_ANSWER_BYTES),
  });
  return {
    name: url.origin === 'https://api.stripe.com' ? 'stripe' : `stripe at ${url.origin}`,
    charge: (request, timeout) =>
      client.paymentIntents
        .create(paymentIntentParams(request), { idempotencyKey: request.idempotencyKey, timeout })
        .then(intentAnswer, answerOfError),
    lookUp: (intentId, timeout) => client.paymentIntents.retrieve(intentId, {}, { timeout }).then(intentAnswer, answerOfError),
    cancel: (intentId, idempotencyKey, timeout) =>
      client.paymentIntents
        .cancel(intentId, { cancellation_reason: 'abandoned' }, { idempotencyKey, timeout })
        .then(intentAnswer, answerOfError),
    findByOrder: (orderId, timeout) =>
      client.paymentIntents
        .search({ query: orderQuery(orderId), limit: 10 }, { timeout })
        .then(
          (found) => ({ kind: 'found' as const, intents: (Array.isArray(found.data) ? found.data : []).map(reportedIntent) }),
          failureOf,
        ),
    refund: (request, timeout) =>
      client.refunds
        .create(
          {
            payment_intent: request.paymentIntentId,
            amount: request.amountYen,
            metadata: { order_id: request.orderId, tenant_id: request.tenantId, refund_id: request.refundId },
          },
          { idempotencyKey: request.idempotencyKey, timeout },
        )
        .then((refund) => ({ kind: 'refund' as const, refund: reportedRefund(refund) }), answerOfRefundError),
    listRefunds: (paymentIntentId, timeout) => allRefundsOf(client, paymentIntentId, timeout),
    listAccountRefunds: ({ from, to, startingAfter }, timeout) =>
      refundPage(
        client,
        { created: { gte: from, ...(to === null ? {} : { lte: to }) }, starting_after: startingAfter ?? undefined },
        timeout,
      ).then((page) => ({ kind: 'found' as const, refunds: page.refunds, hasMore: page.hasMore }), failureOf),
  };
}

/** One page of refunds, newest first, each with its PaymentIntent expanded (whose metadata names the order). */
async function refundPage(client: Stripe, params: Stripe.RefundListParams, timeout: number) {
  const page = await client.refunds.list({ ...params, limit: 100, expand: ['data.payment_intent'] }, { timeout });
  return { refunds: (Array.isArray(page.data) ? page.data : []).map(reportedRefund), hasMore: page.has_more === true };
}

/** Every refund of a PaymentIntent, page after page (at most MAX_REFUND_PAGES, in the time of one call). */
async function allRefundsOf(client: Stripe, paymentIntentId: string, timeout: number): Promise<RefundListAnswer> {
  const until = Date.now() + timeout;
  const refunds: ReportedRefund[] = [];
  try {
    for (let page = 0; page < MAX_REFUND_PAGES; page++) {
      const startingAfter = refunds.at(-1)?.id ?? undefined;
      const read = await refundPage(
        client,
        { payment_intent: paymentIntentId, starting_after: startingAfter },
        Math.max(1, until - Date.now()),
      );
      refunds.push(...read.refunds);
      if (!read.hasMore) return { kind: 'found', refunds };
    }
  } catch (error) {
    return failureOf(error);
  }
  return { kind: 'refused', reason: `more than ${MAX_REFUND_PAGES} pages of refunds` };
}
