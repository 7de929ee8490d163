import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenOnLoopback, type LoopbackServer } from './ports.js';
import {
  chargeJson,
  intentJson,
  refundJson,
  StubLedger,
  stripeError,
  type Answer,
  type RefundQuery,
  type StubCharge,
  type StubIntent,
  type StubRefund,
} from './stripe-stub-intents.js';
import { StubWebhooks } from './stripe-stub-webhooks.js';

/**
 * A local server that speaks Stripe's API as far as checkout uses it (form-encoded, Bearer key,
 * Idempotency-Key): PaymentIntents created and confirmed, looked up, canceled and searched by
 * metadata, refunds made (by the API or in the dashboard) and listed (a PaymentIntent's, or the
 * account's by creation time, the PaymentIntents expanded), 3-D Secure test cards that wait for the customer
 * (`authenticate` finishes or fails it as the browser would), and signed webhooks of every change
 * (stripe-stub-webhooks.ts). It loses answers on purpose. Its idempotency is Stripe's: a key's
 * first request that started executing decides the answer, every later POST with the key and the
 * same parameters gets that answer again, the same key with other parameters is a 400, a request
 * while the first is still executing is a 409, a 5xx before anything executed stores nothing, and
 * `forgetKeys()` prunes every key, as Stripe does after 24 hours. Its ledger of charges and refunds
 * is what a test counts, beside the tables.
 *
 * Faults of a create ride on its payment method, so that requests released together each carry
 * their own: `pm_card_visa__reset` is pm_card_visa whose first requests (per key) lose their
 * answer. A fault applies to the first `times` requests of a key (a suffix `_3` sets it; the
 * default is 1, and 2 for `reset`, because the Stripe client resends once on a closed connection
 * by itself). `failNext(kind, fault)` gives the next look-up, cancel, search or refund one.
 * - `slow`: the request executes for `slowMs` (the key in flight; the change made at the end) before it answers;
 * - `lost502`: the change is made, the answer is a 502 from a gateway;
 * - `reset`: the change is made, the connection is reset instead of an answer;
 * - `error500`: a 500 before anything executed; nothing is stored for the key.
 * `hold()` holds the next request before it executes, for a test to act (or kill the server) meanwhile.
 */

type Fault = 'slow' | 'lost502' | 'reset' | 'error500';
/** `list-refunds`: one PaymentIntent's refunds; `account-refunds`: the account's, by creation time (the reconciler's sweep). */
export type CallKind = 'create' | 'lookup' | 'cancel' | 'search' | 'refund' | 'list-refunds' | 'account-refunds';

interface KeyEntry {
  /** The request's method, path and parameters, as sent: a resend must send the same. */
  params: string;
  /** Set once the first request finished executing. */
  answer: Answer | null;
}

export interface StripeStubOptions {
  secretKey: string;
  /** How long a `slow` request executes (default 1,500 ms). */
  slowMs?: number;
  /** Every request waits this long before it executes: the provider's latency (the benchmark's 400 ms). */
  latencyMs?: number;
  /** A 3-D Secure step is finished (succeeded) this long after it was asked for, as a customer would: the benchmark's. */
  authenticateAfterMs?: number;
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
  /** Refunds made, in order. */
  refunds: StubRefund[];
  /** Every request received. */
  requests: { kind: CallKind | 'other'; key: string | undefined; paymentMethod: string | undefined }[];
  /** What each executed create sent, form fields decoded (the last request per key). */
  lastBody(key: string): Record<string, string> | undefined;
  /** The PaymentIntent of an order (the last one made for it). */
  intentOf(orderId: string): StubIntent | undefined;
  /** As the customer's browser finishing 3-D Secure: the PaymentIntent succeeds (charged) or fails. */
  authenticate(intentId: string, result: 'succeed' | 'fail'): void;
  /** Cancels a PaymentIntent as someone in Stripe's dashboard would (cancellation_reason requested_by_customer). */
  cancelInDashboard(intentId: string): void;
  /** Refunds part of a charge as someone in Stripe's dashboard would: no key, no metadata; its events are sent as any other. */
  refundInDashboard(intentId: string, amountYen: number): StubRefund;
  /** Prunes every idempotency key, as Stripe does after 24 hours. */
  forgetKeys(): void;
  /** The next call of `kind` meets `fault`. */
  failNext(kind: CallKind, fault: Fault): void;
  /** Holds the next request (of `kind`, when given) that arrives, before it executes. */
  hold(kind?: CallKind): Held;
  /** Requests executing or held right now (a request its client gave up on still executes). */
  readonly inFlight: number;
  webhooks: StubWebhooks;
  close(): Promise<void>;
}

/** A request's body as text. */
export function readBody(request: IncomingMessage): Promise<string> {
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

/** The fault and its count a payment method carries, and the method itself. */
function parseFault(method: string): { method: string; fault: Fault | null; times: number } {
  const match = /^(.*)__(slow|lost502|reset|error500)(?:_(\d+))?$/.exec(method);
  if (!match) return { method, fault: null, times: 0 };
  const fault = match[2] as Fault;
  return { method: match[1]!, fault, times: match[3] ? Number(match[3]) : fault === 'reset' ? 2 : 1 };
}

interface Route {
  kind: CallKind;
  /** The intent the path names (look-up, cancel). */
  intentId?: string;
  execute(fields: Record<string, string>, key: string): Answer;
}

function routeOf(ledger: StubLedger, method: string, url: URL): Route | null {
  const path = url.pathname;
  const intentPath = /^\/v1\/payment_intents\/(pi_[^/]+)(\/cancel)?$/.exec(path);
  if (method === 'POST' && path === '/v1/payment_intents') {
    return { kind: 'create', execute: (fields, key) => ledger.create(fields, key, parseFault(fields['payment_method'] ?? '').method) };
  }
  if (method === 'GET' && path === '/v1/payment_intents/search') {
    return { kind: 'search', execute: () => ledger.search(url.searchParams.get('query') ?? '') };
  }
  if (intentPath && method === 'GET' && !intentPath[2]) return { kind: 'lookup', execute: () => ledger.retrieve(intentPath[1]!) };
  if (intentPath && method === 'POST' && intentPath[2]) {
    return { kind: 'cancel', execute: (fields) => ledger.cancel(intentPath[1]!, fields['cancellation_reason']) };
  }
  if (method === 'POST' && path === '/v1/refunds') return { kind: 'refund', execute: (fields, key) => ledger.refund(fields, key) };
  if (method === 'GET' && path === '/v1/refunds') {
    const query = refundQuery(url.searchParams);
    return { kind: query.paymentIntent === null ? 'account-refunds' : 'list-refunds', execute: () => ledger.listRefunds(query) };
  }
  return null;
}

/** GET /v1/refunds's query, as the stripe package encodes it (`created[gte]`, `expand[0]`). */
function refundQuery(params: URLSearchParams): RefundQuery {
  const number = (name: string) => (params.has(name) ? Number(params.get(name)) : null);
  return {
    paymentIntent: params.get('payment_intent'),
    createdGte: number('created[gte]'),
    createdLte: number('created[lte]'),
    startingAfter: params.get('starting_after'),
    limit: Math.min(100, number('limit') ?? 10),
    expandIntent: [...params.entries()].some(([name, value]) => name.startsWith('expand[') && value === 'data.payment_intent'),
  };
}

export async function startStripeStub(options: StripeStubOptions): Promise<StripeStub> {
  const slowMs = options.slowMs ?? 1_500;
  const ledger = new StubLedger();
  const webhooks = new StubWebhooks();
  ledger.onRefund = (refund, intent) => {
    webhooks.record('charge.refunded', chargeJson(intent, ledger.refundedOf(intent.id)), intent.id);
    webhooks.record('refund.created', refundJson(refund), intent.id);
  };
  ledger.onChange = (type, intent) => {
    webhooks.record(type, intentJson(intent), intent.id);
    if (type === 'payment_intent.requires_action' && options.authenticateAfterMs !== undefined) {
      setTimeout(
        () => intent.status === 'requires_action' && ledger.authenticate(intent.id, 'succeed'),
        options.authenticateAfterMs,
      ).unref();
    }
  };
  let keys = new Map<string, KeyEntry>();
  /** Requests seen per key, stored or not: a create's fault applies to the first few. */
  const seen = new Map<string, number>();
  const bodies = new Map<string, Record<string, string>>();
  const nextFaults = new Map<CallKind, Fault[]>();
  const requests: StripeStub['requests'] = [];
  const holds: { kind: CallKind | undefined; resolveArrived: () => void; decision: Promise<'proceed' | 'drop'> }[] = [];
  let inFlight = 0;

  /** The fault this request meets: a create's by its payment method and count, another's by failNext. */
  function faultOf(route: Route, fields: Record<string, string>, key: string | undefined): Fault | null {
    if (route.kind !== 'create') return nextFaults.get(route.kind)?.shift() ?? null;
    const { fault, times } = parseFault(fields['payment_method'] ?? '');
    const earlier = seen.get(key!) ?? 0;
    seen.set(key!, earlier + 1);
    return fault !== null && earlier < times ? fault : null;
  }

  async function handle(request: IncomingMessage, response: ServerResponse) {
    const body = await readBody(request);
    const url = new URL(request.url ?? '/', 'http://stub');
    const key = request.headers['idempotency-key'] as string | undefined;
    const fields = Object.fromEntries(new URLSearchParams(body));
    const route = routeOf(ledger, request.method ?? 'GET', url);
    requests.push({ kind: route?.kind ?? 'other', key, paymentMethod: fields['payment_method'] });
    if (!route)
      return send(response, stripeError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (${request.url})` }));
    if (request.headers.authorization !== `Bearer ${options.secretKey}`) return send(response, unauthorized(request));
    if (request.method === 'POST' && key === undefined) {
      return send(response, stripeError(400, { type: 'invalid_request_error', message: 'checkout sends keys' }));
    }
    const holdAt = holds.findIndex((candidate) => candidate.kind === undefined || candidate.kind === route.kind);
    const hold = holdAt < 0 ? undefined : holds.splice(holdAt, 1)[0];
    if (hold) {
      hold.resolveArrived();
      if ((await hold.decision) === 'drop') return void request.socket.destroy();
    }
    if (options.latencyMs) await sleep(options.latencyMs);
    const fault = faultOf(route, fields, key);
    const params = `${request.method} ${url.pathname} ${body}`;
    const entry = key === undefined || request.method !== 'POST' ? undefined : keys.get(key);
    if (entry) return replay(response, request, entry, params, fault);
    if (fault === 'error500') return send(response, stripeError(500, { type: 'api_error', message: 'An unknown error occurred' }));
    const fresh: KeyEntry = { params, answer: null };
    if (key !== undefined && request.method === 'POST') keys.set(key, fresh);
    if (fault === 'slow') await sleep(slowMs);
    fresh.answer = route.execute(fields, key ?? '');
    if (route.kind === 'create') bodies.set(key!, fields);
    if (fault !== null && fault !== 'slow') return lose(response, fault, request);
    if (!response.destroyed) send(response, fresh.answer);
  }

  function replay(response: ServerResponse, request: IncomingMessage, entry: KeyEntry, params: string, fault: Fault | null) {
    if (entry.params !== params) {
      return send(
        response,
        stripeError(400, { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters' }),
      );
    }
    if (entry.answer === null) {
      return send(
        response,
        stripeError(409, { type: 'idempotency_error', code: 'idempotency_key_in_use', message: 'A request with this key is in flight' }),
      );
    }
    if (fault === 'lost502' || fault === 'reset') return lose(response, fault, request);
    return send(response, entry.answer);
  }

  /** The change was made; the answer is lost on the way. */
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
    charges: ledger.charges,
    refunds: ledger.refunds,
    requests,
    webhooks,
    lastBody: (key) => bodies.get(key),
    intentOf: (orderId) => [...ledger.intents.values()].filter((intent) => intent.metadata['order_id'] === orderId).at(-1),
    authenticate: (intentId, result) => ledger.authenticate(intentId, result),
    cancelInDashboard: (intentId) => void ledger.cancel(intentId, 'requested_by_customer'),
    refundInDashboard: (intentId, amountYen) => ledger.refundInDashboard(intentId, amountYen),
    forgetKeys: () => void (keys = new Map()),
    failNext: (kind, fault) => nextFaults.set(kind, [...(nextFaults.get(kind) ?? []), fault]),
    hold(kind) {
      let resolveArrived!: () => void;
      const arrived = new Promise<void>((resolve) => (resolveArrived = resolve));
      let decide!: (d: 'proceed' | 'drop') => void;
      const decision = new Promise<'proceed' | 'drop'>((resolve) => (decide = resolve));
      holds.push({ kind, resolveArrived, decision });
      return { arrived, proceed: () => decide('proceed'), drop: () => decide('drop') };
    },
    get inFlight() {
      return inFlight;
    },
    close: async () => {
      await webhooks.settled();
      await listening.close();
    },
  };
}

/** Hostile on purpose: the key as presented, and a stack, in the message. */
function unauthorized(request: IncomingMessage): Answer {
  const presented = String(request.headers.authorization ?? '').replace(/^Bearer /, '');
  return stripeError(401, {
    type: 'invalid_request_error',
    message: `Invalid API Key provided: ${presented}\n    at authenticate (/srv/api/auth.rb:12:in 'check')`,
  });
}
