import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenOnLoopback, type LoopbackServer } from './ports.js';

/**
 * A local server that speaks Stripe's PaymentIntents API as far as checkout uses it
 * (`POST /v1/payment_intents` with confirm=true, form-encoded, Bearer key, Idempotency-Key) and
 * loses answers on purpose. Its idempotency is Stripe's: a key's first request that started
 * executing decides the outcome, every later request with the key and the same parameters gets
 * that answer again, the same key with other parameters is a 400, a request while the first is
 * still executing is a 409, and a 5xx before anything executed stores nothing. Its ledger of
 * charges is what a test counts, beside the tables.
 *
 * Faults ride on the payment method, so that requests released together each carry their own:
 * `pm_card_visa__reset` is pm_card_visa whose first requests (per key) lose their answer. A fault
 * applies to the first `times` requests of a key (a suffix `_3` sets it; the default is 1, and 2
 * for `reset`, because the Stripe client resends once on a closed connection by itself):
 * - `slow`: the request executes for `slowMs` (the key in flight; the charge made at the end) before it answers;
 * - `lost502`: the charge is made, the answer is a 502 from a gateway;
 * - `reset`: the charge is made, the connection is reset instead of an answer;
 * - `error500`: a 500 before anything executed; nothing is stored for the key.
 * `hold()` holds the next request before it executes, for a test to kill the server meanwhile.
 */

export type Fault = 'slow' | 'lost502' | 'reset' | 'error500';

export interface StubCharge {
  intentId: string;
  idempotencyKey: string;
  orderId: string;
  tenantId: string;
  amountYen: number;
  currency: string;
  paymentMethod: string;
}

interface Answer {
  status: number;
  body: unknown;
}

interface KeyEntry {
  /** The request's parameters, as sent: a resend must send the same. */
  params: string;
  /** Set once the first request finished executing. */
  answer: Answer | null;
}

/** Stripe's test payment methods: what each does. */
const DECLINES: Record<string, string> = {
  pm_card_chargeDeclined: 'generic_decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
};
const PAYS = new Set(['pm_card_visa', 'pm_card_mastercard', 'pm_card_jp']);

export interface StripeStubOptions {
  secretKey: string;
  /** How long a `slow` request executes (default 1,500 ms). */
  slowMs?: number;
  /** Every request waits this long before it executes: the provider's latency (the benchmark's 400 ms). */
  latencyMs?: number;
}

interface Held {
  arrived: Promise<void>;
  /** Lets the held request execute as it would have. */
  proceed(): void;
  /** Drops it: the connection is destroyed before anything executed, as if it never arrived. */
  drop(): void;
}

export interface StripeStub {
  /** scheme://host:port: STRIPE_API_URL. */
  url: string;
  /** Succeeded charges, in the order they were made. */
  charges: StubCharge[];
  /** Every request received, by idempotency key (undefined key: none sent). */
  requests: { key: string | undefined; paymentMethod: string | undefined }[];
  /** What each executed request sent, form fields decoded (the last request per key). */
  lastBody(key: string): Record<string, string> | undefined;
  /** Holds the next request that arrives before it executes. */
  hold(): Held;
  /** Requests executing or held right now (a request its client gave up on still executes). */
  readonly inFlight: number;
  close(): Promise<void>;
}

const paymentIntent = (id: string, status: string, amount: number, paymentMethod: string, orderId: string) => ({
  id,
  object: 'payment_intent',
  amount,
  currency: 'jpy',
  status,
  payment_method: paymentMethod,
  metadata: { order_id: orderId },
  livemode: false,
});

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => resolve(body));
    request.on('error', reject);
  });
}

function send(response: ServerResponse, answer: Answer) {
  response.writeHead(answer.status, { 'content-type': 'application/json', 'request-id': `req_${randomBytes(8).toString('hex')}` });
  response.end(JSON.stringify(answer.body));
}

const stripeError = (status: number, error: Record<string, unknown>): Answer => ({ status, body: { error } });

/** The fault and its count a payment method carries, and the method itself. */
export function parseFault(method: string): { method: string; fault: Fault | null; times: number } {
  const match = /^(.*)__(slow|lost502|reset|error500)(?:_(\d+))?$/.exec(method);
  if (!match) return { method, fault: null, times: 0 };
  const fault = match[2] as Fault;
  return { method: match[1]!, fault, times: match[3] ? Number(match[3]) : fault === 'reset' ? 2 : 1 };
}

export async function startStripeStub(options: StripeStubOptions): Promise<StripeStub> {
  const slowMs = options.slowMs ?? 1_500;
  const keys = new Map<string, KeyEntry>();
  /** Requests seen per key, stored or not: a fault applies to the first few. */
  const seen = new Map<string, number>();
  const bodies = new Map<string, Record<string, string>>();
  const charges: StubCharge[] = [];
  const requests: StripeStub['requests'] = [];
  const holds: { resolveArrived: () => void; decision: Promise<'proceed' | 'drop'>; decide: (d: 'proceed' | 'drop') => void }[] = [];
  let inFlight = 0;

  /** Executes a payment intent's creation and confirmation: the charge, or the decline. */
  function execute(fields: Record<string, string>, key: string, method: string): Answer {
    const intentId = `pi_${randomBytes(12).toString('hex')}`;
    const amount = Number(fields['amount']);
    const orderId = fields['metadata[order_id]'] ?? '';
    if (!Number.isInteger(amount) || amount < 1 || fields['currency'] !== 'jpy') {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'parameter_invalid_integer',
        param: 'amount',
        message: 'Invalid amount',
      });
    }
    // Stripe's minimum charge in JPY, and its answer to a payment method it does not have: both
    // 400s, answered again to every resend of the key.
    if (amount < 50) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'amount_too_small',
        param: 'amount',
        message: 'Amount must be at least ¥50 jpy',
      });
    }
    const decline = DECLINES[method];
    if (decline === undefined && !PAYS.has(method)) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param: 'payment_method',
        message: `No such PaymentMethod: '${method}'`,
      });
    }
    if (decline !== undefined) {
      const code = decline;
      return stripeError(402, {
        type: 'card_error',
        code: 'card_declined',
        decline_code: code,
        message: 'Your card was declined.',
        payment_intent: paymentIntent(intentId, 'requires_payment_method', amount, method, orderId),
      });
    }
    charges.push({
      intentId,
      idempotencyKey: key,
      orderId,
      tenantId: fields['metadata[tenant_id]'] ?? '',
      amountYen: amount,
      currency: fields['currency']!,
      paymentMethod: fields['payment_method']!,
    });
    return { status: 200, body: paymentIntent(intentId, 'succeeded', amount, method, orderId) };
  }

  async function handle(request: IncomingMessage, response: ServerResponse) {
    const body = await readBody(request);
    const key = request.headers['idempotency-key'] as string | undefined;
    const fields = Object.fromEntries(new URLSearchParams(body));
    requests.push({ key, paymentMethod: fields['payment_method'] });
    if (request.method !== 'POST' || request.url !== '/v1/payment_intents') {
      return send(response, stripeError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (${request.url})` }));
    }
    if (request.headers.authorization !== `Bearer ${options.secretKey}`) {
      // Hostile on purpose: the key as presented, and a stack, in the message.
      const presented = String(request.headers.authorization ?? '').replace(/^Bearer /, '');
      return send(
        response,
        stripeError(401, {
          type: 'invalid_request_error',
          message: `Invalid API Key provided: ${presented}\n    at authenticate (/srv/api/auth.rb:12:in 'check')`,
        }),
      );
    }
    if (key === undefined) return send(response, stripeError(400, { type: 'invalid_request_error', message: 'checkout sends keys' }));
    const hold = holds.shift();
    if (hold) {
      hold.resolveArrived();
      if ((await hold.decision) === 'drop') return void request.socket.destroy();
    }
    if (options.latencyMs) await sleep(options.latencyMs);
    const { method, fault, times } = parseFault(fields['payment_method'] ?? '');
    const entry = keys.get(key);
    const earlier = seen.get(key) ?? 0;
    seen.set(key, earlier + 1);
    const faulty = fault !== null && earlier < times;
    if (entry) {
      if (entry.params !== body) {
        return send(
          response,
          stripeError(400, {
            type: 'idempotency_error',
            message: 'Keys for idempotent requests can only be used with the same parameters',
          }),
        );
      }
      if (entry.answer === null) {
        return send(
          response,
          stripeError(409, { type: 'idempotency_error', code: 'idempotency_key_in_use', message: 'A request with this key is in flight' }),
        );
      }
      if (faulty && fault !== 'slow' && fault !== 'error500') return lose(response, fault, request);
      return send(response, entry.answer);
    }
    if (faulty && fault === 'error500') {
      return send(response, stripeError(500, { type: 'api_error', message: 'An unknown error occurred' }));
    }
    const fresh: KeyEntry = { params: body, answer: null };
    keys.set(key, fresh);
    if (faulty && fault === 'slow') await sleep(slowMs);
    fresh.answer = execute(fields, key, method);
    bodies.set(key, fields);
    if (faulty && fault !== 'slow') return lose(response, fault!, request);
    if (!response.destroyed) send(response, fresh.answer);
  }

  /** The charge was made; the answer is lost on the way. */
  function lose(response: ServerResponse, fault: Fault, request: IncomingMessage) {
    if (fault === 'reset') return void request.socket.resetAndDestroy();
    response.writeHead(502, { 'content-type': 'text/html' });
    response.end('<html><body><h1>502 Bad Gateway</h1></body></html>');
  }

  const server = http.createServer((request, response) => {
    // Counted until the handler is done, not until the client hangs up: a slow request executes on.
    inFlight++;
    handle(request, response)
      .catch(() => response.destroy())
      .finally(() => inFlight--);
  });
  const listening: LoopbackServer = await listenOnLoopback(server);
  return {
    url: listening.origin,
    charges,
    requests,
    lastBody: (key) => bodies.get(key),
    hold() {
      let resolveArrived!: () => void;
      const arrived = new Promise<void>((resolve) => (resolveArrived = resolve));
      let decide!: (d: 'proceed' | 'drop') => void;
      const decision = new Promise<'proceed' | 'drop'>((resolve) => (decide = resolve));
      holds.push({ resolveArrived, decision, decide });
      return { arrived, proceed: () => decide('proceed'), drop: () => decide('drop') };
    },
    get inFlight() {
      return inFlight;
    },
    close: () => listening.close(),
  };
}
