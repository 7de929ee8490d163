import type { ReportedIntent } from '../payments/provider.js';

/**
 * A PaymentIntent id as Stripe makes them (`pi_` and letters, digits, `_`), short enough for the
 * tables' columns: an id the table would refuse (empty, 300 characters, a NUL) never reaches it.
 */
export const INTENT_ID = /^pi_[A-Za-z0-9_]{1,250}$/;
/** A refund id as Stripe makes them, short enough for the tables' columns. */
export const REFUND_ID = /^(re|pyr)_[A-Za-z0-9_]{1,250}$/;
/** Its client secret: the intent's id, `_secret_`, and letters and digits. */
const CLIENT_SECRET = /^pi_[A-Za-z0-9_]{1,250}_secret_[A-Za-z0-9]{1,100}$/;

/** What a PaymentIntent must say to be this payment's. */
export interface ExpectedIntent {
  tenantId: string;
  orderId: string;
  amountYen: number;
  /** The id an earlier answer named, once one did: every later answer must name the same. */
  intentId: string | null;
}

/**
 * Why a reported PaymentIntent is not this payment's, or null when it is: its id's shape, the id
 * learned before, the amount, the currency (JPY), and the order and tenant its metadata names.
 * A provider's answer, a look-up, a search and a webhook are all held to this before anything is
 * settled from them (docs/design.md §11): an answer for 1 yen, in dollars, naming another order or
 * tenant, or with no id at all settles nothing.
 */
export function intentMismatch(intent: ReportedIntent, expected: ExpectedIntent): string | null {
  if (intent.id === null || !INTENT_ID.test(intent.id)) return 'its id is not a PaymentIntent id';
  if (expected.intentId !== null && intent.id !== expected.intentId) return `it names ${intent.id}, the payment is ${expected.intentId}`;
  if (intent.amount !== expected.amountYen) return `its amount is ${intent.amount}, the payment's ${expected.amountYen}`;
  if (intent.currency !== 'jpy') return `its currency is ${String(intent.currency).slice(0, 10)}, not jpy`;
  if (intent.orderId !== expected.orderId) return 'its metadata names another order';
  if (intent.tenantId !== expected.tenantId) return 'its metadata names another tenant';
  if (intent.status === 'requires_action' && !clientSecretOf(intent)) return 'it asks for authentication with no client secret of its own';
  return null;
}

/** The client secret of a verified intent, when it is one of its own. */
export function clientSecretOf(intent: ReportedIntent): string | null {
  const secret = intent.clientSecret;
  return secret !== null && CLIENT_SECRET.test(secret) && secret.startsWith(`${intent.id}_secret_`) ? secret : null;
}

/** A failure code short and plain enough to store and show (Stripe's are snake_case words). */
export function failureCodeOf(code: string | null): string | null {
  return code !== null && /^[A-Za-z0-9_.-]{1,100}$/.test(code) ? code : null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TENANT_ID = /^[\s\S]{1,128}$/;

/** Whether a text has the shape of an id this server makes (a refund's, an order's). */
export const isUuid = (text: string | null): text is string => text !== null && UUID.test(text);

/**
 * The order a PaymentIntent's metadata names, when it has the shape of one of this server's (an
 * order id, a tenant id short enough for the tables): where an event or a list is looked up. Naming
 * it proves nothing: the PaymentIntent is still matched against the order before anything is settled.
 */
export function orderNamedBy(intent: ReportedIntent): { tenantId: string; orderId: string } | null {
  if (!isUuid(intent.orderId) || intent.tenantId === null || !TENANT_ID.test(intent.tenantId)) return null;
  return { tenantId: intent.tenantId, orderId: intent.orderId };
}
