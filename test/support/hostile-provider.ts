import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { listenOnLoopback, type LoopbackServer } from './ports.js';
import { readBody } from './stripe-stub.js';

/**
 * A provider that speaks Stripe's protocol and lies: it answers every request with what the test
 * scripts, including what no well-behaved Stripe would send. An answer of hundreds of megabytes, an
 * answer that trickles one byte a second, a `succeeded` PaymentIntent for another amount, currency,
 * order or tenant, one with no id or an id no table takes. It counts the sockets still open to it,
 * so a test can see whether the server gave up a call or only stopped waiting for it.
 */

/** A create request as the hostile provider read it. */
export interface HostileRequest {
  method: string;
  path: string;
  fields: Record<string, string>;
}

type HostileAnswer =
  | { kind: 'json'; status?: number; body: unknown }
  /** A 200 that begins like `body` and goes on with `bytes` of padding inside a string. */
  | { kind: 'huge'; body: Record<string, unknown>; bytes: number }
  /** A 200 whose body comes one byte every `everyMs`. */
  | { kind: 'trickle'; everyMs: number };

export interface HostileProvider {
  url: string;
  /** What each request is answered; set by the test, changed whenever it likes. */
  answer: (request: HostileRequest) => HostileAnswer;
  requests: HostileRequest[];
  /** Sockets open to it now. */
  readonly openSockets: number;
  /** Bytes of answers it wrote before the client closed. */
  readonly bytesSent: number;
  close(): Promise<void>;
}

/** A PaymentIntent that says exactly what the create request asked for, succeeded: what the lies are made from. */
export function honestIntent(request: HostileRequest, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: `pi_hostile${Math.random().toString(36).slice(2, 12)}`,
    object: 'payment_intent',
    amount: Number(request.fields['amount']),
    currency: request.fields['currency'],
    status: 'succeeded',
    metadata: { order_id: request.fields['metadata[order_id]'], tenant_id: request.fields['metadata[tenant_id]'] },
    ...overrides,
  };
}

const PADDING_CHUNK = Buffer.alloc(64 * 1024, 'a');

export async function startHostileProvider(): Promise<HostileProvider> {
  const sockets = new Set<Socket>();
  const requests: HostileRequest[] = [];
  let bytesSent = 0;
  const provider: HostileProvider = {
    url: '',
    answer: (request) => ({ kind: 'json', body: honestIntent(request) }),
    requests,
    get openSockets() {
      return sockets.size;
    },
    get bytesSent() {
      return bytesSent;
    },
    close: async () => undefined,
  };

  /** Writes `bytes` of padding as fast as the client reads, stopping when it hangs up. */
  async function pad(response: ServerResponse, bytes: number) {
    for (let left = bytes; left > 0 && !response.destroyed; left -= PADDING_CHUNK.length) {
      const chunk = left >= PADDING_CHUNK.length ? PADDING_CHUNK : PADDING_CHUNK.subarray(0, left);
      bytesSent += chunk.length;
      if (!response.write(chunk)) await drainedOrClosed(response);
    }
  }

  /** Until the client has read what was written, or hung up; neither listener outlives the wait. */
  function drainedOrClosed(response: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        response.off('drain', done).off('close', done);
        resolve();
      };
      response.on('drain', done).on('close', done);
    });
  }

  async function trickle(response: ServerResponse, everyMs: number) {
    while (!response.destroyed) {
      response.write('{');
      bytesSent++;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }

  async function handle(request: IncomingMessage, response: ServerResponse) {
    const body = await readBody(request);
    const seen = { method: request.method ?? 'GET', path: request.url ?? '/', fields: Object.fromEntries(new URLSearchParams(body)) };
    requests.push(seen);
    const answer = provider.answer(seen);
    if (answer.kind === 'json') {
      const text = JSON.stringify(answer.body);
      bytesSent += text.length;
      response.writeHead(answer.status ?? 200, { 'content-type': 'application/json' });
      return void response.end(text);
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    if (answer.kind === 'trickle') return trickle(response, answer.everyMs);
    const head = JSON.stringify({ ...answer.body, padding: '' }).slice(0, -2);
    response.write(head);
    await pad(response, answer.bytes);
    if (!response.destroyed) response.end('"}');
  }

  const server = http.createServer((request, response) => void handle(request, response).catch(() => response.destroy()));
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const listening: LoopbackServer = await listenOnLoopback(server);
  provider.url = listening.origin;
  provider.close = () => listening.close();
  return provider;
}
