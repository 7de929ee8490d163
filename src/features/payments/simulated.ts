import { randomBytes } from 'node:crypto';
import type {
  ChargeRequest,
  PaymentAnswer,
  PaymentProvider,
  RefundAnswer,
  RefundPageAnswer,
  RefundWindow,
  ReportedIntent,
  ReportedRefund,
} from './provider.js';

/** Stripe's test payment methods the simulated provider knows, and what each does. */
const SIMULATED_PAYMENT_METHODS: Readonly<Record<string, 'succeeds' | 'authenticates' | string>> = {
  pm_card_visa: 'succeeds',
  pm_card_mastercard: 'succeeds',
  pm_card_jp: 'succeeds',
  pm_card_threeDSecure2Required: 'authenticates',
  pm_card_authenticationRequired: 'authenticates',
  pm_card_chargeDeclined: 'generic_decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
  pm_card_chargeDeclinedExpiredCard: 'expired_card',
};

/** The code Stripe gives a payment whose authentication failed. */
const AUTHENTICATION_FAILED = 'payment_intent_authentication_failure';

/** Keys and intents remembered at most; the oldest are forgotten first (a development server runs for hours, not months). */
const KEPT = 100_000;

/** How a person finishes or fails an authentication the simulated provider asked for (the development page). */
interface SimulatedAuthentication {
  /** The payment a client secret belongs to, while it waits for its customer; null otherwise. */
  waiting(clientSecret: string): { intentId: string; amountYen: number } | null;
  /** As the customer's browser would: succeeded, or back to requires_payment_method with AUTHENTICATION_FAILED. */
  finish(clientSecret: string, succeed: boolean): boolean;
}

export type SimulatedProvider = PaymentProvider & SimulatedAuthentication;

type Intent = ReportedIntent & { id: string; status: string; refunded: ReportedRefund[] };

function remember<V>(map: Map<string, V>, key: string, value: V): V {
  if (map.size >= KEPT) map.delete(map.keys().next().value!);
  map.set(key, value);
  return value;
}

function reported({ refunded: _refunded, ...intent }: Intent): ReportedIntent {
  return intent;
}
const snapshot = (intent: Intent): PaymentAnswer => ({ kind: 'intent', intent: reported(intent), failureCode: intent.failureCode });
const idOf = (intent: Intent): [string, Intent] => [intent.id, intent];
const missing: PaymentAnswer = { kind: 'unknown', reason: 'invalid_request_error HTTP 404 resource_missing' };

function create(request: ChargeRequest): Intent {
  const id = `pi_sim_${randomBytes(12).toString('hex')}`;
  const behaviour = SIMULATED_PAYMENT_METHODS[request.paymentMethod];
  const declined = behaviour !== 'succeeds' && behaviour !== 'authenticates';
  return {
    id,
    status: behaviour === 'succeeds' ? 'succeeded' : behaviour === 'authenticates' ? 'requires_action' : 'requires_payment_method',
    amount: request.amountYen,
    currency: 'jpy',
    orderId: request.orderId,
    tenantId: request.tenantId,
    clientSecret: `${id}_secret_${randomBytes(12).toString('hex')}`,
    failureCode: declined ? (behaviour ?? 'invalid_payment_method') : null,
    refunded: [],
  };
}

/** A refund of what is left of a succeeded intent, or the reason Stripe would refuse it. */
function refundOf(intent: Intent | undefined, amountYen: number, refundId: string): RefundAnswer {
  if (!intent || intent.status !== 'succeeded') return { kind: 'rejected', failureCode: 'payment_intent_unexpected_state' };
  const left = intent.amount! - intent.refunded.reduce((sum, r) => sum + r.amount!, 0);
  if (amountYen > left) return { kind: 'rejected', failureCode: 'charge_already_refunded' };
  const refund: ReportedRefund = {
    id: `re_sim_${randomBytes(12).toString('hex')}`,
    status: 'succeeded',
    amount: amountYen,
    paymentIntentId: intent.id,
    refundId,
    failureCode: null,
    created: Math.floor(Date.now() / 1000),
    intent: null,
  };
  intent.refunded.push(refund);
  return { kind: 'refund', refund };
}

/** A refund as a list shows it: with its PaymentIntent described. */
const listed =
  (intent: Intent) =>
  (refund: ReportedRefund): ReportedRefund => ({ ...refund, intent: reported(intent) });

/** Pages of the account's refunds as Stripe gives them: newest first, within the window, after `startingAfter`. */
function accountRefundPage(intents: Iterable<Intent>, { from, to, startingAfter }: RefundWindow): RefundPageAnswer {
  const all = [...intents]
    .flatMap((intent) => intent.refunded.map(listed(intent)))
    .filter((refund) => refund.created! >= from && (to === null || refund.created! <= to))
    .sort((a, b) => b.created! - a.created!);
  const start = startingAfter === null ? 0 : all.findIndex((refund) => refund.id === startingAfter) + 1;
  const page = all.slice(start, start + REFUNDS_PER_PAGE);
  return { kind: 'found', refunds: page, hasMore: start + REFUNDS_PER_PAGE < all.length };
}

const REFUNDS_PER_PAGE = 100;

/**
 * The payment provider of a development server without STRIPE_SECRET_KEY: Stripe's test payment
 * methods behave as in Stripe's test mode (`pm_card_visa` pays, `pm_card_chargeDeclined` is
 * declined, `pm_card_threeDSecure2Required` asks for authentication, which a person finishes or
 * fails on the development page, an unknown method is declined as `invalid_payment_method`), a
 * key sent again answers its first outcome, as Stripe's idempotency does, and a payment is looked
 * up, canceled, found by its order and refunded as at Stripe. Its memory is this process's.
 */
export function simulatedProvider(): SimulatedProvider {
  const intents = new Map<string, Intent>();
  const byKey = new Map<string, PaymentAnswer | RefundAnswer>();
  const bySecret = new Map<string, string>();
  const once = <A extends PaymentAnswer | RefundAnswer>(key: string, act: () => A): Promise<A> =>
    Promise.resolve((byKey.get(key) as A | undefined) ?? (remember(byKey, key, act()) as A));
  const waitingIntent = (clientSecret: string) => {
    const intent = intents.get(bySecret.get(clientSecret) ?? '');
    return intent?.status === 'requires_action' ? intent : null;
  };
  return {
    name: 'simulated',
    charge: (request) =>
      once(request.idempotencyKey, () => {
        const intent = remember(intents, ...idOf(create(request)));
        remember(bySecret, intent.clientSecret!, intent.id);
        return snapshot(intent);
      }),
    lookUp: (intentId) => Promise.resolve(intents.has(intentId) ? snapshot(intents.get(intentId)!) : missing),
    cancel: (intentId, key) =>
      once(key, () => {
        const intent = intents.get(intentId);
        if (!intent) return missing;
        if (intent.status !== 'succeeded' && intent.status !== 'canceled') {
          Object.assign(intent, { status: 'canceled', failureCode: intent.failureCode ?? 'abandoned' });
        }
        return snapshot(intent);
      }),
    findByOrder: (orderId) =>
      Promise.resolve({ kind: 'found', intents: [...intents.values()].filter((i) => i.orderId === orderId).map(reported) }),
    refund: (request) =>
      once(request.idempotencyKey, () => refundOf(intents.get(request.paymentIntentId), request.amountYen, request.refundId)),
    listRefunds: (paymentIntentId) => {
      const intent = intents.get(paymentIntentId);
      return Promise.resolve({ kind: 'found', refunds: intent ? intent.refunded.map(listed(intent)) : [] });
    },
    listAccountRefunds: (window) => Promise.resolve(accountRefundPage(intents.values(), window)),
    waiting(clientSecret) {
      const intent = waitingIntent(clientSecret);
      return intent ? { intentId: intent.id, amountYen: intent.amount! } : null;
    },
    finish(clientSecret, succeed) {
      const intent = waitingIntent(clientSecret);
      if (!intent) return false;
      Object.assign(intent, succeed ? { status: 'succeeded' } : { status: 'requires_payment_method', failureCode: AUTHENTICATION_FAILED });
      return true;
    },
  };
}
