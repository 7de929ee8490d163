import http from 'node:http';
import { mutate, MutationError, type Transport } from '../../src/client/mutate.js';

export interface GraphQLReply {
  status: number;
  body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
  latencyMs: number;
  headers: http.IncomingHttpHeaders;
  /** Bytes of the response bodies received for it (every send's, when resent). */
  bytes: number;
  /** Sends it took (more than 1 only when resending, see LoadClientOptions.resend). */
  attempts?: number;
}

export interface LoadClientOptions {
  /**
   * Send mutations as a frontend would, with the project's typed client (src/client/mutate.ts):
   * one Idempotency-Key per request, resent on TRY_AGAIN and on network failures after
   * Retry-After, until `resendDeadlineMs`. Latency then covers every resend.
   */
  resend?: boolean;
  resendDeadlineMs?: number;
  /** A request whose connection stays silent this long fails (NO_ANSWER) instead of waiting for ever. */
  requestTimeoutMs?: number;
  /**
   * A new connection per request instead of keep-alive: a probe that must not mistake the race of
   * a request with the server closing an idle socket (its keep-alive timeout) for a failure.
   */
  keepAlive?: boolean;
}

const MUTATION = /^\s*mutation\b/;

/**
 * A keep-alive HTTP client for concurrency tests and the load tool. `open()` makes every socket
 * before the first measured request, so a barrier release puts all requests on the wire together
 * instead of queueing them behind TCP handshakes.
 */
export class LoadClient {
  private readonly agent: http.Agent;
  /** The GraphQL endpoint; other paths of the same server (`/dev/authenticate`) are resolved against it. */
  readonly url: URL;

  constructor(
    graphqlUrl: string,
    readonly connections: number,
    private readonly options: LoadClientOptions = {},
  ) {
    this.url = new URL(graphqlUrl);
    this.agent = new http.Agent({ keepAlive: options.keepAlive ?? true, maxSockets: connections, maxFreeSockets: connections });
  }

  async open(): Promise<void> {
    const health = new URL('/health', this.url);
    await Promise.all(Array.from({ length: this.connections }, () => this.request('GET', health, undefined, {})));
  }

  graphql(query: string, variables: Record<string, unknown>, headers: Record<string, string>): Promise<GraphQLReply> {
    if (this.options.resend && MUTATION.test(query)) return this.mutation(query, variables, headers);
    return this.request('POST', this.url, JSON.stringify({ query, variables }), headers);
  }

  /**
   * A mutation through the typed client, on this client's connections: resent with one key until
   * it is answered or refused (set-up steps use it, so a busy moment never fails a run's set-up).
   */
  async mutation(query: string, variables: Record<string, unknown>, headers: Record<string, string>): Promise<GraphQLReply> {
    const started = performance.now();
    let last: GraphQLReply | null = null;
    let bytes = 0;
    const transport: Transport = async (_url, init) => {
      last = await this.request('POST', this.url, init.body, init.headers);
      bytes += last.bytes;
      return { status: last.status, body: last.body, headers: { get: (name) => headerValue(last!.headers, name) } };
    };
    const { 'idempotency-key': key, ...rest } = headers;
    try {
      const result = await mutate<Record<string, unknown>, Record<string, unknown>>(query, variables, {
        url: this.url.toString(),
        headers: rest,
        ...(key ? { idempotencyKey: key } : {}),
        deadlineMs: this.options.resendDeadlineMs ?? 30_000,
        transport,
      });
      return { ...last!, body: { data: result.data }, latencyMs: performance.now() - started, bytes, attempts: result.attempts };
    } catch (error) {
      if (!(error instanceof MutationError)) throw error;
      const latencyMs = performance.now() - started;
      // A lost connection has no answer of its own to show: the reply says so in the code.
      if (error.code === 'NETWORK' || last === null) {
        return {
          status: 0,
          body: { errors: [{ message: error.message, extensions: { code: error.code } }] },
          latencyMs,
          headers: {},
          bytes,
          attempts: error.attempts,
        };
      }
      return { ...(last as GraphQLReply), latencyMs, bytes, attempts: error.attempts };
    }
  }

  /**
   * A Hasura action at POST /actions, as Hasura sends it (`x-hasura-*` session headers become
   * `session_variables`), its answer shaped like GraphQL's: a 200 payload as `data[name]`, an error
   * `{message, extensions}` as `errors[0]`.
   */
  async action(name: string, input: Record<string, unknown>, headers: Record<string, string>): Promise<GraphQLReply> {
    const session = Object.fromEntries(Object.entries(headers).filter(([header]) => header.startsWith('x-hasura-')));
    const forwarded = Object.fromEntries(Object.entries(headers).filter(([header]) => !header.startsWith('x-hasura-')));
    const body = JSON.stringify({ action: { name }, input, session_variables: session });
    const reply = await this.request('POST', new URL('/actions', this.url), body, forwarded);
    const answer = reply.body as unknown;
    return {
      ...reply,
      body:
        reply.status === 200
          ? { data: { [name]: answer } }
          : { errors: [answer as { message: string; extensions?: Record<string, unknown> }] },
    };
  }

  close(): void {
    this.agent.destroy();
  }

  private request(method: string, url: URL, body: string | undefined, headers: Record<string, string>): Promise<GraphQLReply> {
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = http.request(
        url,
        {
          method,
          agent: this.agent,
          headers: {
            ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }),
            accept: 'application/json',
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: GraphQLReply['body'];
            try {
              parsed = JSON.parse(text) as GraphQLReply['body'];
            } catch {
              parsed = { errors: [{ message: text.slice(0, 200), extensions: { code: `HTTP_${res.statusCode}` } }] };
            }
            const bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
            resolve({ status: res.statusCode ?? 0, body: parsed, latencyMs: performance.now() - started, headers: res.headers, bytes });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      const timeoutMs = this.options.requestTimeoutMs;
      if (timeoutMs) {
        req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'NO_ANSWER' })));
      }
      if (body !== undefined) req.write(body);
      req.end();
    });
  }
}

function headerValue(headers: http.IncomingHttpHeaders, name: string): string | null {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? (value[0] ?? null) : (value ?? null);
}

/** A gate that many tasks wait on and one call opens, so they start in the same instant. */
export function barrier(): { wait: Promise<void>; release: () => void } {
  let release!: () => void;
  const wait = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { wait, release };
}

/**
 * Runs tasks from `next` (null: no more) on `concurrency` lanes, all released together once every
 * lane exists. Results come back in task order.
 */
export async function runLanes<T>(next: (index: number) => (() => Promise<T>) | null, concurrency: number): Promise<T[]> {
  const gate = barrier();
  const results: T[] = [];
  let index = 0;
  let exhausted = false;
  const lanes = Array.from({ length: concurrency }, async () => {
    await gate.wait;
    while (!exhausted) {
      const mine = index++;
      const task = next(mine);
      if (task === null) {
        exhausted = true;
        break;
      }
      results[mine] = await task();
    }
  });
  gate.release();
  await Promise.all(lanes);
  return results.filter((r) => r !== undefined);
}

/** Runs `tasks` with at most `concurrency` in flight, all released together. */
export function runReleasedTogether<T>(tasks: (() => Promise<T>)[], concurrency: number): Promise<T[]> {
  return runLanes((index) => tasks[index] ?? null, Math.min(concurrency, tasks.length));
}
