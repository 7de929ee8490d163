import { randomBytes } from 'node:crypto';

/**
 * The state of the Stripe stub (stripe-stub.ts): its PaymentIntents, the charges and refunds it
 * made, as Stripe's test mode behaves for the test payment methods checkout uses. Each operation
 * returns the HTTP answer Stripe would give; the server around it adds idempotency and faults.
 */

export interface Answer {
  status: number;
  body: unknown;
}

export interface StubCharge {
  intentId: string;
  idempotencyKey: string;
  orderId: string;
  tenantId: string;
  amountYen: number;
  currency: string;
  paymentMethod: string;
}

export interface StubRefund {
  id: string;
  intentId: string;
  orderId: string;
  amountYen: number;
  /** Empty for a refund made in the dashboard. */
  idempotencyKey: string;
  /** metadata.refund_id: the server's refund; empty for one made in the dashboard. */
  refundId: string;
  /** Epoch seconds. */
  created: number;
}

/** Which refunds a GET /v1/refunds asks for, as its query string says. */
export interface RefundQuery {
  paymentIntent: string | null;
  createdGte: number | null;
  createdLte: number | null;
  startingAfter: string | null;
  limit: number;
  /** expand[]=data.payment_intent: each refund with its PaymentIntent object. */
  expandIntent: boolean;
}

export interface StubIntent {
  id: string;
  amount: number;
  currency: string;
  status: string;
  paymentMethod: string;
  metadata: Record<string, string>;
  clientSecret: string;
  lastPaymentError: { code: string; decline_code?: string } | null;
  cancellationReason: string | null;
  idempotencyKey: string;
}

/** Stripe's test payment methods: what each does. */
const DECLINES: Record<string, string> = {
  pm_card_chargeDeclined: 'generic_decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
};
const PAYS = new Set(['pm_card_visa', 'pm_card_mastercard', 'pm_card_jp']);
/** Cards that ask for 3-D Secure on every payment. */
const AUTHENTICATES = new Set(['pm_card_threeDSecure2Required', 'pm_card_authenticationRequired']);

export const stripeError = (status: number, error: Record<string, unknown>): Answer => ({ status, body: { error } });

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

export function intentJson(intent: StubIntent) {
  return {
    id: intent.id,
    object: 'payment_intent',
    amount: intent.amount,
    currency: intent.currency,
    status: intent.status,
    payment_method: intent.paymentMethod,
    client_secret: intent.clientSecret,
    metadata: intent.metadata,
    last_payment_error: intent.lastPaymentError,
    cancellation_reason: intent.cancellationReason,
    next_action:
      intent.status === 'requires_action' ? { type: 'use_stripe_sdk', use_stripe_sdk: { type: 'three_d_secure_redirect' } } : null,
    livemode: false,
  };
}

export class StubLedger {
  readonly intents = new Map<string, StubIntent>();
  readonly charges: StubCharge[] = [];
  readonly refunds: StubRefund[] = [];
  /** Told of every change of an intent's status: the webhooks' source. */
  onChange: (type: string, intent: StubIntent) => void = () => undefined;
  /** Told of every refund made, by the API or in the dashboard: the webhooks' source. */
  onRefund: (refund: StubRefund, intent: StubIntent) => void = () => undefined;

  /** Creates and confirms a PaymentIntent: the charge, a 3-D Secure step, or the decline. */
  create(fields: Record<string, string>, key: string, method: string): Answer {
    const amount = Number(fields['amount']);
    if (!Number.isInteger(amount) || amount < 1 || fields['currency'] !== 'jpy') {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'parameter_invalid_integer',
        param: 'amount',
        message: 'Invalid amount',
      });
    }
    if (amount < 50) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'amount_too_small',
        param: 'amount',
        message: 'Amount must be at least ¥50 jpy',
      });
    }
    const decline = DECLINES[method];
    if (decline === undefined && !PAYS.has(method) && !AUTHENTICATES.has(method)) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param: 'payment_method',
        message: `No such PaymentMethod: '${method}'`,
      });
    }
    const intentId = id('pi');
    const intent: StubIntent = {
      id: intentId,
      amount,
      currency: 'jpy',
      status: 'requires_confirmation',
      paymentMethod: fields['payment_method']!,
      metadata: { order_id: fields['metadata[order_id]'] ?? '', tenant_id: fields['metadata[tenant_id]'] ?? '' },
      clientSecret: `${intentId}_secret_${randomBytes(12).toString('hex')}`,
      lastPaymentError: null,
      cancellationReason: null,
      idempotencyKey: key,
    };
    this.intents.set(intentId, intent);
    if (decline !== undefined) {
      this.move(intent, 'requires_payment_method', { code: 'card_declined', decline_code: decline });
      return stripeError(402, {
        type: 'card_error',
        code: 'card_declined',
        decline_code: decline,
        message: 'Your card was declined.',
        payment_intent: intentJson(intent),
      });
    }
    if (AUTHENTICATES.has(method)) this.move(intent, 'requires_action');
    else this.succeed(intent);
    return { status: 200, body: intentJson(intent) };
  }

  private move(intent: StubIntent, status: string, error: StubIntent['lastPaymentError'] = null) {
    intent.status = status;
    if (error) intent.lastPaymentError = error;
    const type = {
      requires_action: 'payment_intent.requires_action',
      requires_payment_method: 'payment_intent.payment_failed',
      succeeded: 'payment_intent.succeeded',
      canceled: 'payment_intent.canceled',
    }[status];
    if (type) this.onChange(type, intent);
  }

  private succeed(intent: StubIntent) {
    this.charges.push({
      intentId: intent.id,
      idempotencyKey: intent.idempotencyKey,
      orderId: intent.metadata['order_id']!,
      tenantId: intent.metadata['tenant_id']!,
      amountYen: intent.amount,
      currency: intent.currency,
      paymentMethod: intent.paymentMethod,
    });
    this.move(intent, 'succeeded');
  }

  /** As the customer's browser finishing 3-D Secure: succeeded (the charge made), or failed back to requires_payment_method. */
  authenticate(intentId: string, result: 'succeed' | 'fail'): void {
    const intent = this.intents.get(intentId);
    if (intent?.status !== 'requires_action') throw new Error(`${intentId} does not wait for an authentication (${intent?.status})`);
    if (result === 'succeed') this.succeed(intent);
    else this.move(intent, 'requires_payment_method', { code: 'payment_intent_authentication_failure' });
  }

  retrieve(intentId: string): Answer {
    const intent = this.intents.get(intentId);
    if (!intent)
      return stripeError(404, {
        type: 'invalid_request_error',
        code: 'resource_missing',
        message: `No such payment_intent: '${intentId}'`,
      });
    return { status: 200, body: intentJson(intent) };
  }

  /** Stripe cancels what has not succeeded; a succeeded or canceled one answers 400 with the intent. */
  cancel(intentId: string, reason: string | undefined): Answer {
    const intent = this.intents.get(intentId);
    if (!intent) return this.retrieve(intentId);
    if (intent.status === 'succeeded' || intent.status === 'canceled') {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'payment_intent_unexpected_state',
        message: `You cannot cancel this PaymentIntent because it has a status of ${intent.status}.`,
        payment_intent: intentJson(intent),
      });
    }
    intent.cancellationReason = reason ?? null;
    this.move(intent, 'canceled');
    return { status: 200, body: intentJson(intent) };
  }

  /** `metadata['order_id']:'…'`, the one query checkout sends. */
  search(query: string): Answer {
    const orderId = /^metadata\['order_id'\]:'([^']*)'$/.exec(query)?.[1];
    if (orderId === undefined) return stripeError(400, { type: 'invalid_request_error', message: 'unsupported query' });
    const found = [...this.intents.values()].filter((intent) => intent.metadata['order_id'] === orderId).map(intentJson);
    return { status: 200, body: { object: 'search_result', data: found, has_more: false } };
  }

  refund(fields: Record<string, string>, key: string): Answer {
    const made = this.makeRefund(this.intents.get(fields['payment_intent'] ?? ''), Number(fields['amount']), {
      idempotencyKey: key,
      refundId: fields['metadata[refund_id]'] ?? '',
    });
    return 'status' in made ? made : { status: 200, body: refundJson(made) };
  }

  /** A refund made in Stripe's dashboard (or by another client of the account): no key, no metadata of this server's. */
  refundInDashboard(intentId: string, amountYen: number): StubRefund {
    const made = this.makeRefund(this.intents.get(intentId), amountYen, { idempotencyKey: '', refundId: '' });
    if ('status' in made) throw new Error(`the dashboard refused the refund: ${JSON.stringify(made.body)}`);
    return made;
  }

  /** Stripe's rules for a refund: of a succeeded payment, at most what is left of it. */
  private makeRefund(intent: StubIntent | undefined, amount: number, made: Pick<StubRefund, 'idempotencyKey' | 'refundId'>) {
    if (!intent || intent.status !== 'succeeded') {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'payment_intent_unexpected_state',
        message: 'not a succeeded payment',
      });
    }
    const left = intent.amount - this.refundedOf(intent.id);
    if (!Number.isInteger(amount) || amount < 1 || amount > left) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'charge_already_refunded',
        message: `Refund amount is greater than ${left}`,
      });
    }
    const refund: StubRefund = {
      id: id('re'),
      intentId: intent.id,
      orderId: intent.metadata['order_id']!,
      amountYen: amount,
      created: Math.floor(Date.now() / 1000),
      ...made,
    };
    this.refunds.push(refund);
    this.onRefund(refund, intent);
    return refund;
  }

  refundedOf(intentId: string): number {
    return this.refunds.filter((r) => r.intentId === intentId).reduce((sum, r) => sum + r.amountYen, 0);
  }

  /** GET /v1/refunds: newest first, by PaymentIntent and creation time, paged with starting_after. */
  listRefunds(query: RefundQuery): Answer {
    const matching = [...this.refunds]
      .reverse()
      .filter(
        (refund) =>
          (query.paymentIntent === null || refund.intentId === query.paymentIntent) &&
          (query.createdGte === null || refund.created >= query.createdGte) &&
          (query.createdLte === null || refund.created <= query.createdLte),
      );
    const start = query.startingAfter === null ? 0 : matching.findIndex((refund) => refund.id === query.startingAfter) + 1;
    const data = matching
      .slice(start, start + query.limit)
      .map((refund) => refundJson(refund, query.expandIntent ? this.intents.get(refund.intentId) : undefined));
    return { status: 200, body: { object: 'list', data, has_more: start + query.limit < matching.length } };
  }
}

/** A refund as Stripe shows it; with `intent`, its payment_intent expanded to the object. */
export const refundJson = (refund: StubRefund, intent?: StubIntent) => ({
  id: refund.id,
  object: 'refund',
  amount: refund.amountYen,
  currency: 'jpy',
  status: 'succeeded',
  created: refund.created,
  payment_intent: intent ? intentJson(intent) : refund.intentId,
  metadata: refund.refundId === '' ? {} : { order_id: refund.orderId, refund_id: refund.refundId },
});

/** The charge of a PaymentIntent as charge.refunded describes it. */
export const chargeJson = (intent: StubIntent, amountRefunded: number) => ({
  id: `ch_${intent.id.slice(3)}`,
  object: 'charge',
  amount: intent.amount,
  amount_refunded: amountRefunded,
  currency: intent.currency,
  payment_intent: intent.id,
  refunded: amountRefunded === intent.amount,
  status: 'succeeded',
  metadata: {},
});
