import http from 'node:http';

export interface GraphQLReply {
  status: number;
  body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
  latencyMs: number;
  headers: http.IncomingHttpHeaders;
}

/**
 * A keep-alive HTTP client for concurrency tests and the load tool. `open()` makes every socket
 * before the first measured request, so a barrier release puts all requests on the wire together
 * instead of queueing them behind TCP handshakes.
 */
export class LoadClient {
  private readonly agent: http.Agent;
  private readonly url: URL;

  constructor(
    graphqlUrl: string,
    readonly connections: number,
  ) {
    this.url = new URL(graphqlUrl);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  }

  async open(): Promise<void> {
    const health = new URL('/health', this.url);
    await Promise.all(Array.from({ length: this.connections }, () => this.request('GET', health, undefined, {})));
  }

  graphql(query: string, variables: Record<string, unknown>, headers: Record<string, string>): Promise<GraphQLReply> {
    return this.request('POST', this.url, JSON.stringify({ query, variables }), headers);
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
            resolve({ status: res.statusCode ?? 0, body: parsed, latencyMs: performance.now() - started, headers: res.headers });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      if (body !== undefined) req.write(body);
      req.end();
    });
  }
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
