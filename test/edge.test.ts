import { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInTransaction } from '../src/db/transaction.js';
import {
  asUser,
  createContractRow,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  serveOverHttp,
  type TestBackend,
} from './support/harness.js';

const SECRET = 'edge-secret-0123456789abcdef';
const METRICS_TOKEN = 'metrics-token-0123456789';
const APP_ORIGIN = 'https://app.example.com';

/** A production server: a secret, introspection and CORS at their production defaults. */
const PRODUCTION = { NODE_ENV: 'production', ACTION_SECRET: SECRET };
const asMember = (tenant: string) => ({ ...asUser(tenant), 'x-action-secret': SECRET });

describe('production hygiene', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { ...PRODUCTION, CORS_ORIGINS: APP_ORIGIN, METRICS_TOKEN } });
    await createTenant(backend, 'edge');
  });
  afterAll(() => backend.close());

  const post = (body: string, headers: Record<string, string>) =>
    backend.app.fetch(new Request('http://test.local/graphql', { method: 'POST', headers, body }));

  it('answers a body that is not JSON 400 BAD_USER_INPUT, without repeating any of it', async () => {
    const response = await post('{"query": "a-secret-the-client-typed', { 'content-type': 'application/json' });
    expect(response.status).toBe(400);
    const text = await response.text();
    expect(JSON.parse(text).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(text).not.toContain('a-secret-the-client-typed');
  });

  it('answers no introspection and no field suggestions', async () => {
    const introspection = await gql(backend.app.fetch, '{ __schema { types { name } } }', {}, asMember('edge'));
    expect(introspection.body.data ?? null).toBeNull();
    expect(new Set(errorCodes(introspection))).toEqual(new Set(['BAD_USER_INPUT']));
    expect(introspection.text).toMatch(/introspection/i);
    const typo = await gql(backend.app.fetch, '{ contract { titel } contracs { id } }', {}, asMember('edge'));
    expect(typo.body.errors?.length).toBeGreaterThan(0);
    expect(typo.text).not.toMatch(/Did you mean/);
    expect(typo.text).not.toMatch(/"contracts"|"title"/);
  });

  it('introspects when GRAPHQL_INTROSPECTION=true, with suggestions', async () => {
    const open = await createTestBackend({ databaseUrl: backend.databaseUrl, env: { ...PRODUCTION, GRAPHQL_INTROSPECTION: 'true' } });
    try {
      const introspection = await gql(open.app.fetch, '{ __schema { queryType { name } } }', {}, asMember('edge'));
      expect(introspection.body.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
      const typo = await gql(open.app.fetch, '{ contracs { id } }', {}, asMember('edge'));
      expect(typo.text).toMatch(/Did you mean [^?]*\\"contracts\\"/);
    } finally {
      await open.close();
    }
  });

  it('allows a listed origin with credentials and the headers a client needs, and nobody else', async () => {
    const from = (origin: string) =>
      post(JSON.stringify({ query: '{ viewer { role } }' }), { 'content-type': 'application/json', origin, ...asMember('edge') });
    const listed = await from(APP_ORIGIN);
    expect(listed.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(listed.headers.get('access-control-allow-credentials')).toBe('true');
    expect(listed.headers.get('access-control-expose-headers')?.toLowerCase().split(/,\s*/).sort()).toEqual([
      'idempotent-replayed',
      'retry-after',
      'traceparent',
      'x-request-id',
    ]);
    expect(listed.headers.get('vary')).toMatch(/Origin/i);
    const unlisted = await from('https://evil.example.net');
    expect(unlisted.headers.get('access-control-allow-origin')).toBeNull();
    expect(unlisted.headers.get('access-control-allow-credentials')).toBeNull();
    const preflight = await backend.app.fetch(
      new Request('http://test.local/graphql', {
        method: 'OPTIONS',
        headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'POST' },
      }),
    );
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('executes only JSON bodies: a form-encoded, multipart or text mutation answers 415 and writes nothing', async () => {
    const query = 'mutation { createContract(input: { title: "from a form" }) { contract { id } } }';
    const form = new URLSearchParams({ query }).toString();
    const bodies: [string, string][] = [
      ['application/x-www-form-urlencoded', form],
      [
        'multipart/form-data; boundary=x',
        `--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${JSON.stringify({ query })}\r\n--x--\r\n`,
      ],
      ['text/plain', JSON.stringify({ query })],
    ];
    for (const [contentType, body] of bodies) {
      for (const path of ['/graphql', '/actions']) {
        const response = await backend.app.fetch(
          new Request(`http://test.local${path}`, { method: 'POST', headers: { 'content-type': contentType, ...asMember('edge') }, body }),
        );
        expect({ contentType, path, status: response.status }).toEqual({ contentType, path, status: 415 });
        // A GraphQL response on /graphql, Hasura's shape on /actions.
        const answer = (await response.json()) as { errors?: { extensions: { code: string } }[]; extensions?: { code: string } };
        expect((path === '/graphql' ? answer.errors?.[0] : answer)?.extensions?.code).toBe('BAD_USER_INPUT');
      }
    }
    const { rows } = await backend.sql.query("select count(*)::int as n from contracts where tenant_id = 'edge'");
    expect(rows[0].n).toBe(0);
    const json = await post(JSON.stringify({ query }), { 'content-type': 'application/json; charset=utf-8', ...asMember('edge') });
    expect(json.status).toBe(200);
  });

  it('guards /metrics with METRICS_TOKEN; /health tells nothing about the process', async () => {
    const metrics = (authorization?: string) =>
      backend.app.fetch(new Request('http://test.local/metrics', { headers: authorization ? { authorization } : {} }));
    expect((await metrics()).status).toBe(401);
    expect((await metrics('Bearer not-the-token-at-all')).status).toBe(401);
    const allowed = await metrics(`Bearer ${METRICS_TOKEN}`);
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toMatch(/graphql_operations\{state="in_flight",pid="\d+"\}/);
    const health = await backend.app.fetch(new Request('http://test.local/health'));
    expect(await health.json()).toEqual({ status: 'ok' });
  });
});

describe('bounded observability', () => {
  let backend: TestBackend;
  let lines: string[];
  beforeAll(async () => {
    lines = [];
    const { createLogger } = await import('../src/logger.js');
    backend = await createTestBackend({ log: createLogger('info', { write: (line: string) => void lines.push(line) }) });
    await createTenant(backend, 'labels');
  });
  afterAll(() => backend.close());

  const scrape = async () => (await backend.app.fetch(new Request('http://test.local/metrics'))).text();

  it('labels requests with schema root fields, never with what the client wrote', async () => {
    await gql(backend.app.fetch, '{ viewer { role } }', {}, asUser('labels'));
    const baseline = (await scrape()).length;
    const aliasPatterns = async (from: number, to: number) => {
      for (let i = from; i <= to; i++) {
        const aliases = Array.from({ length: (i % 14) + 1 }, (_, j) => `a${i}_${j}: viewer { role }`).join(' ');
        const mixed = i % 3 === 0 ? `${aliases} tenant { id }` : aliases;
        await gql(backend.app.fetch, `query Op${i} { ${mixed} }`, {}, asUser('labels'));
      }
      await gql(backend.app.fetch, '{ this is not graphql', {}, asUser('labels'));
    };
    await aliasPatterns(1, 100);
    const after100 = (await scrape()).length;
    await aliasPatterns(101, 200);
    const text = await scrape();
    console.log(`/metrics: ${baseline} bytes after 1 request, ${after100} after 100 alias patterns, ${text.length} after 200`);
    // The few fixed labels (multiple, invalid, their outcomes) appear once; after that, nothing grows.
    expect(text.length - baseline).toBeLessThan(8_192);
    expect(Math.abs(text.length - after100)).toBeLessThan(256);
    const operations = new Set([...text.matchAll(/operation="([^"]*)"/g)].map((m) => m[1]));
    expect([...operations].sort()).toEqual(['invalid', 'multiple', 'viewer']);
    expect(text).not.toMatch(/="[^"]*,[^"]*"/);
    const logged = lines.filter((line) => line.includes('request completed')).map((line) => JSON.parse(line).operation);
    expect(new Set(logged)).toEqual(new Set(['viewer', 'multiple', 'invalid']));
  });

  it('takes an outcome only from a status enum: a field aliased as status is no label', async () => {
    for (let i = 0; i < 20; i++) {
      await gql(backend.app.fetch, '{ viewer { status: userId } }', {}, asUser('labels', `injected-${i}`));
    }
    const outcomes = new Set([...(await scrape()).matchAll(/outcome="([^"]*)"/g)].map((m) => m[1]));
    expect([...outcomes].filter((outcome) => outcome!.includes('injected'))).toEqual([]);
    const logged = lines.filter((line) => line.includes('request completed')).map((line) => JSON.parse(line).outcome ?? null);
    expect(logged.filter((outcome) => String(outcome).includes('injected'))).toEqual([]);
  });
});

describe('HTTP on a real socket', () => {
  let backend: TestBackend;
  let url: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { MAX_BODY_BYTES: '2000', HTTP_REQUEST_TIMEOUT_MS: '1000', HTTP_MAX_CONNECTIONS: '4' } });
    await createTenant(backend, 'sockets');
    const served = await serveOverHttp(backend);
    url = served.url;
    close = () => served.server.close();
  });
  afterAll(async () => {
    await close();
    await backend.close();
  });

  it('takes a media type in any case, and its refusals before GraphQL carry the code and the request id', async () => {
    const body = JSON.stringify({ query: '{ viewer { role } }' });
    for (const chunked of [false, true]) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'APPLICATION/JSON', ...asUser('sockets') },
        ...(chunked ? { body: new Blob([body]).stream(), duplex: 'half' } : { body }),
      } as RequestInit);
      expect({ chunked, status: response.status }).toEqual({ chunked, status: 200 });
    }
    for (const [status, contentType, sent] of [
      [415, 'text/plain', body],
      [413, 'application/json', JSON.stringify({ query: `{ viewer { role } } # ${'x'.repeat(3_000)}` })],
    ] as const) {
      const refused = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': contentType, 'x-request-id': `refused-${status}` },
        body: sent,
      });
      expect(refused.status).toBe(status);
      const { errors } = (await refused.json()) as { errors: { message: string; extensions: Record<string, unknown> }[] };
      expect(errors).toHaveLength(1);
      expect(errors[0]!.extensions).toEqual({
        code: 'BAD_USER_INPUT',
        ...(status === 413 ? { limit: 'MAX_BODY_BYTES' } : {}),
        requestId: `refused-${status}`,
      });
    }
  });

  it('answers an oversized body 413 and closes the connection cleanly: ten more requests on the keep-alive client succeed', async () => {
    // fetch keeps connections alive; a connection left open after the unread rest of a large body
    // failed the next request on it with ECONNRESET.
    const send = (body: string | ReadableStream) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...asUser('sockets') },
        body,
        duplex: 'half',
      } as RequestInit);
    const large = JSON.stringify({ query: `{ viewer { role } } # ${'x'.repeat(300_000)}` });
    for (const body of [large, new Blob([large]).stream()]) {
      const oversized = await send(body);
      expect(oversized.status).toBe(413);
      expect(oversized.headers.get('connection')).toBe('close');
      await oversized.text();
      for (let i = 0; i < 10; i++) {
        const ok = await send(JSON.stringify({ query: '{ viewer { role } }' }));
        expect(ok.status).toBe(200);
        await ok.text();
      }
    }
  });

  it('ends a request whose body arrives too slowly (HTTP_REQUEST_TIMEOUT_MS)', async () => {
    const { port } = new URL(url);
    const socket = new Socket();
    await new Promise<void>((resolve) => socket.connect(Number(port), '127.0.0.1', resolve));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    const started = performance.now();
    socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"qu');
    const at = await Promise.race([closed, sleep(10_000, -1)]);
    expect(at).toBeGreaterThan(0);
    console.log(`slow body: socket closed after ${(at - started).toFixed(0)} ms`);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('refuses sockets beyond HTTP_MAX_CONNECTIONS', async () => {
    // A server of its own: the keep-alive sockets of the other tests would count too.
    const own = await serveOverHttp(backend);
    const { port } = new URL(own.url);
    const sockets = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const socket = new Socket();
        const state = { closed: false };
        socket.on('close', () => (state.closed = true));
        socket.on('error', () => undefined);
        await new Promise<void>((resolve) => socket.connect(Number(port), '127.0.0.1', resolve));
        return { socket, state };
      }),
    );
    await sleep(300);
    const refused = sockets.filter(({ state }) => state.closed).length;
    for (const { socket } of sockets) socket.destroy();
    await own.server.close();
    expect(refused).toBe(2);
  });
});

describe('Retry-After', () => {
  let backend: TestBackend;
  let contractId: string;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET, DB_POOL_MAX: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '1500' } });
    await createTenant(backend, 'later');
    contractId = await createContractRow(backend, 'later');
  });
  afterAll(() => backend.close());

  it('comes with TRY_AGAIN on /graphql and /actions, in seconds, with retryAfterMs in the body', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const holder = runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + 20_000 }, async (trx) => {
      await sql`select 1`.execute(trx);
      holding();
      await released;
    });
    await held;
    try {
      const graphql = await gql(
        backend.app.fetch,
        'mutation ($id: UUID!) { createContractDocument(input: { contractId: $id }) { document { id } } }',
        { id: contractId },
        asMember('later'),
      );
      expect(errorCodes(graphql)).toEqual(['TRY_AGAIN']);
      expect(graphql.body.errors![0]!.extensions).toMatchObject({ retryAfterMs: 1500 });
      expect(graphql.headers.get('retry-after')).toBe('2');
      const action = await backend.app.fetch(
        new Request('http://test.local/actions', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-action-secret': SECRET },
          body: JSON.stringify({
            action: { name: 'createContractDocument' },
            input: { input: { contractId } },
            session_variables: asUser('later'),
          }),
        }),
      );
      expect(action.status).toBe(409);
      expect(action.headers.get('retry-after')).toBe('2');
      const body = (await action.json()) as { extensions: Record<string, unknown> };
      expect(body.extensions).toMatchObject({ code: 'TRY_AGAIN', retryAfterMs: 1500 });
      expect(body.extensions).not.toHaveProperty('http');
    } finally {
      release();
      await holder;
    }
  });
});

describe('what a socket can do that fetch cannot', () => {
  let backend: TestBackend;
  let port: number;
  let close: () => Promise<void>;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    const { createLogger } = await import('../src/logger.js');
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    backend = await createTestBackend({ log });
    const served = await serveOverHttp(backend);
    port = Number(new URL(served.url).port);
    close = () => served.server.close();
  });
  afterAll(async () => {
    await close();
    await backend.close();
  });

  /** Writes raw HTTP and gives what came back when the server closed or `settleMs` passed. */
  async function raw(text: string, options: { hangUp?: boolean; settleMs?: number } = {}): Promise<string> {
    const socket = new Socket();
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.connect(port, '127.0.0.1', resolve));
    socket.write(text);
    await sleep(options.settleMs ?? 200);
    if (options.hangUp) socket.destroy();
    else socket.end();
    await sleep(200);
    return answer;
  }

  it('answers TRACE 405 with a code, and logs it as a request, not as a server error', async () => {
    const answer = await raw('TRACE /graphql HTTP/1.1\r\nHost: x\r\nx-request-id: trace-1\r\nConnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 405 /);
    expect(answer).toContain('"code":"BAD_USER_INPUT"');
    const logged = lines.filter((line) => line['requestId'] === 'trace-1');
    expect(logged.map((line) => [line['level'], line['msg'], line['status']])).toEqual([['info', 'request completed', 405]]);
  });

  it('logs a client that hangs up in the middle of its chunked body as gone, not as a server error', async () => {
    const head =
      'POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nx-request-id: gone-1\r\n\r\n';
    await raw(`${head}10\r\n{"query":"{ view\r\n`, { hangUp: true });
    await sleep(300);
    const logged = lines.filter((line) => line['requestId'] === 'gone-1');
    expect(logged.filter((line) => line['level'] !== 'info')).toEqual([]);
    expect(logged.find((line) => line['msg'] === 'request completed')).toMatchObject({ status: 499 });
  });
});
