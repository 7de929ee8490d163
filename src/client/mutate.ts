import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print, type DocumentNode } from 'graphql';

/**
 * A small typed client for frontends and scripts that sends one mutation the way this server's
 * retry contract asks: one Idempotency-Key per user action, kept across every resend; resent on
 * TRY_AGAIN and on network failures with full jitter, never sooner than Retry-After; given up at
 * a deadline, which holds for an attempt in flight too: each attempt is aborted when the deadline
 * comes (a server that accepts and never answers, a connection kept alive to a frozen process). A
 * replayed answer (the first attempt committed, its response was lost) is marked.
 */

/** What a transport answers; the default sends with fetch. */
export interface TransportResponse {
  status: number;
  headers: { get(name: string): string | null };
  body: unknown;
}

/** `signal` aborts when the deadline comes: a transport must give up the attempt then (reject), answer and all. */
export type Transport = (
  url: string,
  init: { headers: Record<string, string>; body: string; signal: AbortSignal },
) => Promise<TransportResponse>;

export interface MutateOptions {
  /** The GraphQL endpoint, e.g. https://api.example.com/graphql. */
  url: string;
  /** Authorization, x-hasura-* and the like. */
  headers?: Record<string, string>;
  /** One key per user action; a new UUID when not given. Pass the same key to resume an action. */
  idempotencyKey?: string;
  /** Give up after this long, counted from the first attempt (default 30 s); an attempt still in flight then is aborted. */
  deadlineMs?: number;
  /** Full jitter: before attempt n+1, wait random(0, min(maxDelayMs, baseDelayMs * 2^n)). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Send the document's persisted hash (graphql-codegen client preset) instead of its text. */
  persisted?: boolean;
  transport?: Transport;
  /** For tests: the clock and the pause between attempts. */
  sleep?: (ms: number) => Promise<void>;
}

export interface MutateResult<T> {
  data: T;
  /** The server answered with the stored response of an earlier attempt. */
  replayed: boolean;
  attempts: number;
  idempotencyKey: string;
}

export interface GraphQLErrorBody {
  message: string;
  extensions?: { code?: string; requestId?: string; retryAfterMs?: number } & Record<string, unknown>;
}

/**
 * The server refused the mutation (a code other than TRY_AGAIN), or the deadline passed: then the
 * code of the last attempt's outcome (TRY_AGAIN, NETWORK, HTTP_5xx), or DEADLINE when an attempt
 * was still waiting for its answer. Whether a mutation that met its deadline committed is unknown:
 * resend it with the same `idempotencyKey` to find out.
 */
export class MutationError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly attempts: number,
    readonly errors: GraphQLErrorBody[] = [],
    readonly requestId?: string,
  ) {
    super(message);
    this.name = 'MutationError';
  }
}

/** GraphQL over HTTP's media type first (errors keep their 4xx status), plain JSON for servers that lack it. */
export const ACCEPT = 'application/graphql-response+json, application/json';

const DEFAULTS = { deadlineMs: 30_000, baseDelayMs: 100, maxDelayMs: 5_000 };

const fetchTransport: Transport = async (url, init) => {
  // The signal covers the body too: a server may send the headers and then stall.
  const response = await fetch(url, { method: 'POST', headers: init.headers, body: init.body, signal: init.signal });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: response.status, headers: response.headers, body };
};

type Outcome<T> =
  | { kind: 'done'; result: { data: T; replayed: boolean } }
  | { kind: 'retry'; waitAtLeastMs: number; reason: MutationError }
  | { kind: 'refused'; error: MutationError };

function requestBody(document: DocumentNode | string, variables: unknown, persisted: boolean): string {
  if (typeof document === 'string') return JSON.stringify({ query: document, variables });
  const hash = (document as { __meta__?: { hash?: string } }).__meta__?.hash;
  if (persisted && hash) return JSON.stringify({ variables, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
  return JSON.stringify({ query: print(document), variables });
}

/** Milliseconds the server asked us to wait: extensions.retryAfterMs, else the Retry-After header. */
function retryAfterMs(response: TransportResponse, error: GraphQLErrorBody | undefined): number {
  const fromBody = error?.extensions?.retryAfterMs;
  if (typeof fromBody === 'number' && fromBody >= 0) return fromBody;
  const seconds = Number(response.headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}

function judge<T>(response: TransportResponse, attempt: number): Outcome<T> {
  const body = (response.body ?? {}) as { data?: T | null; errors?: GraphQLErrorBody[] };
  const errors = body.errors ?? [];
  const first = errors[0];
  const code = first?.extensions?.code ?? (response.status >= 500 ? 'HTTP_' + response.status : undefined);
  if (!code && body.data)
    return { kind: 'done', result: { data: body.data, replayed: response.headers.get('idempotent-replayed') === 'true' } };
  const error = new MutationError(
    first?.message ?? `HTTP ${response.status}`,
    code ?? 'UNKNOWN',
    attempt,
    errors,
    first?.extensions?.requestId,
  );
  // A gateway in between that lost its upstream (502, 503, 504) is a network failure too.
  if (code === 'TRY_AGAIN' || [502, 503, 504].includes(response.status)) {
    return { kind: 'retry', waitAtLeastMs: retryAfterMs(response, first), reason: error };
  }
  return { kind: 'refused', error };
}

/**
 * The transport's promise, or a rejection once `signal` aborts, whichever comes first: a transport
 * of the caller's that ignores the signal still cannot hold the caller past the deadline.
 */
function attemptWithin<T>(signal: AbortSignal, send: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    send()
      .then(resolve, reject)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Sends one mutation until it is answered, refused, or the deadline passes. */
export async function mutate<TData, TVariables>(
  document: TypedDocumentNode<TData, TVariables> | string,
  variables: TVariables,
  options: MutateOptions,
): Promise<MutateResult<TData>> {
  const { deadlineMs, baseDelayMs, maxDelayMs } = { ...DEFAULTS, ...options };
  const transport = options.transport ?? fetchTransport;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const idempotencyKey = options.idempotencyKey ?? crypto.randomUUID();
  const giveUpAt = Date.now() + deadlineMs;
  const headers = {
    'content-type': 'application/json',
    accept: ACCEPT,
    ...options.headers,
    'idempotency-key': idempotencyKey,
  };
  const body = requestBody(document, variables, options.persisted ?? false);
  for (let attempt = 1; ; attempt++) {
    let outcome: Outcome<TData>;
    // What is left of the deadline bounds this attempt: an answer that never comes cannot hold the caller past it.
    const timeout = AbortSignal.timeout(Math.max(1, giveUpAt - Date.now()));
    try {
      outcome = judge<TData>(await attemptWithin(timeout, () => transport(options.url, { headers, body, signal: timeout })), attempt);
    } catch (cause) {
      if (timeout.aborted) {
        throw new MutationError(
          `no answer within the deadline of ${deadlineMs} ms (attempt ${attempt}); it may have committed: resend with the same key to know`,
          'DEADLINE',
          attempt,
        );
      }
      // The request or its answer was lost: the mutation may have committed, and the same key makes the resend safe.
      const error = new MutationError(`network failure: ${(cause as Error).message}`, 'NETWORK', attempt);
      outcome = { kind: 'retry', waitAtLeastMs: 0, reason: error };
    }
    if (outcome.kind === 'done') return { ...outcome.result, attempts: attempt, idempotencyKey };
    if (outcome.kind === 'refused') throw outcome.error;
    const jitter = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
    const waitMs = Math.max(jitter, outcome.waitAtLeastMs);
    if (Date.now() + waitMs >= giveUpAt) {
      throw new MutationError(
        `gave up after ${attempt} attempts: ${outcome.reason.message}`,
        outcome.reason.code,
        attempt,
        outcome.reason.errors,
      );
    }
    await sleep(waitMs);
  }
}
