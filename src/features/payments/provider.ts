/**
 * The payment provider as checkout sees it (docs/design.md §11): the calls it makes about one
 * order's payment and one order's refunds, and what their answers can mean. Stripe's PaymentIntents
 * speak it in production (stripe.ts); a simulated provider speaks it in development without a key
 * (simulated.ts). Nothing an answer says is trusted here: checkout matches every PaymentIntent with
 * its order before it settles anything from it (src/features/checkout/verify.ts).
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
 * A PaymentIntent as an answer described it, field by field as received (null where the field was
 * missing or of another type): the provider's word, checked against the order before use.
 */
export interface ReportedIntent {
  id: string | null;
  status: string | null;
  amount: number | null;
  currency: string | null;
  /** metadata.order_id and metadata.tenant_id, which every create sends. */
  orderId: string | null;
  tenantId: string | null;
  /** client_secret: what Stripe.js needs to finish an authentication in the customer's browser. */
  clientSecret: string | null;
  /** last_payment_error's decline_code or code, else the cancellation reason. */
  failureCode: string | null;
}

/**
 * What a call about a payment came to:
 * - `intent`: the provider described the PaymentIntent (a 200, or an error that carried it: a 402
 *   decline, a 400 "unexpected state" to a cancel of one that succeeded);
 * - `declined`: refused for good without a PaymentIntent (a payment method the provider does not
 *   have): no charge was made, and every resend gets the same;
 * - `unknown`: no outcome (a timeout, a reset, a 5xx, a 409 while the first request is in flight);
 *   the charge may or may not have been made, and the call may be asked again;
 * - `refused`: an answer this server will not read (over its size limit, not JSON): as unknown,
 *   except that asking again is not expected to help.
 */
export type PaymentAnswer =
  | { kind: 'intent'; intent: ReportedIntent; failureCode: string | null }
  | { kind: 'declined'; failureCode: string }
  | { kind: 'unknown'; reason: string }
  | { kind: 'refused'; reason: string };

/** The answer to a search of the provider's PaymentIntents by an order's id. */
type SearchAnswer =
  { kind: 'found'; intents: ReportedIntent[] } | { kind: 'unknown'; reason: string } | { kind: 'refused'; reason: string };

/** One refund, the same on every call about it. */
export interface RefundRequest {
  idempotencyKey: string;
  tenantId: string;
  orderId: string;
  refundId: string;
  paymentIntentId: string;
  amountYen: number;
}

/** A refund as an answer described it (metadata.refund_id names this server's refund). */
export interface ReportedRefund {
  id: string | null;
  status: string | null;
  amount: number | null;
  paymentIntentId: string | null;
  refundId: string | null;
  failureCode: string | null;
  /** When the provider made it (epoch seconds, the provider's clock). */
  created: number | null;
  /** Its PaymentIntent, when a list described it too (its metadata names the order): null otherwise. */
  intent: ReportedIntent | null;
}

/** `rejected`: the provider refused the refund for good (no refund made); the rest as for a payment. */
export type RefundAnswer =
  | { kind: 'refund'; refund: ReportedRefund }
  | { kind: 'rejected'; failureCode: string }
  | { kind: 'unknown'; reason: string }
  | { kind: 'refused'; reason: string };

/** The refunds the provider holds for a PaymentIntent, each with the PaymentIntent described. */
export type RefundListAnswer =
  { kind: 'found'; refunds: ReportedRefund[] } | { kind: 'unknown'; reason: string } | { kind: 'refused'; reason: string };

/** Which of the account's refunds to list: created from `from` to `to` (epoch seconds, inclusive), older than `startingAfter`. */
export interface RefundWindow {
  from: number;
  /** Null: up to now. */
  to: number | null;
  /** The last refund of the page before (they come newest first); null for the first page. */
  startingAfter: string | null;
}

/** One page of the account's refunds, newest first, each with its PaymentIntent described; `hasMore`: older ones follow. */
export type RefundPageAnswer =
  | { kind: 'found'; refunds: ReportedRefund[]; hasMore: boolean }
  | { kind: 'unknown'; reason: string }
  | { kind: 'refused'; reason: string };

/**
 * Every call waits at most `timeoutMs`, after which it is given up and its connection closed, and
 * never throws for what the provider or the network did: a failure is `unknown` (or `refused`)
 * with a reason that carries no secret and no stack.
 */
export interface PaymentProvider {
  /** How the start-up message and the metrics name it. */
  readonly name: string;
  /** Creates and confirms the payment (POST /v1/payment_intents), with the order's key. */
  charge(request: ChargeRequest, timeoutMs: number): Promise<PaymentAnswer>;
  /** The PaymentIntent as it stands (GET /v1/payment_intents/:id). */
  lookUp(intentId: string, timeoutMs: number): Promise<PaymentAnswer>;
  /** Cancels it (POST /v1/payment_intents/:id/cancel, with a key): the answer says whether it was canceled, or what it was instead. */
  cancel(intentId: string, idempotencyKey: string, timeoutMs: number): Promise<PaymentAnswer>;
  /** The PaymentIntents whose metadata names the order (Stripe's search): for a payment whose key the provider may have forgotten. */
  findByOrder(orderId: string, timeoutMs: number): Promise<SearchAnswer>;
  /** Refunds part of a charge (POST /v1/refunds), with the refund's key. */
  refund(request: RefundRequest, timeoutMs: number): Promise<RefundAnswer>;
  /** The refunds of a PaymentIntent, whoever made them (GET /v1/refunds?payment_intent=…, the PaymentIntent expanded). */
  listRefunds(paymentIntentId: string, timeoutMs: number): Promise<RefundListAnswer>;
  /** One page of every refund of the account made within a window (GET /v1/refunds?created…, the PaymentIntents expanded). */
  listAccountRefunds(window: RefundWindow, timeoutMs: number): Promise<RefundPageAnswer>;
}

/**
 * Stripe's smallest charge in JPY (its "Minimum and maximum charge amounts": ¥50). A smaller one is a
 * 400 that no resend changes, so checkout refuses it before anything is written.
 */
export const MINIMUM_CHARGE_YEN = 50;

/** The most bytes of an answer this server reads: Stripe's answers are a few kilobytes (a page of 100 refunds, each with its PaymentIntent, a few hundred). */
export const MAX_ANSWER_BYTES = 1_048_576;

/** A list of one PaymentIntent's refunds is read up to this many pages of 100: more than any charge has (each refund is 1 yen at least, and Stripe makes few). */
export const MAX_REFUND_PAGES = 10;

/** A reason short enough for a log field and the intent's last_error. */
export function shortReason(reason: string): string {
  return reason.replace(/\s+/g, ' ').slice(0, 200);
}
