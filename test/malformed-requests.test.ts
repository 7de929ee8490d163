import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { MAX_REQUEST_HEADERS, requestUrlCheck, requestUrlOf } from '../src/http/node-request.js';
import { createTenant, serveTestBackend, type ServedBackend } from './support/harness.js';

const SECRET = 'malformed-secret-0123456789';
const METRICS_TOKEN = 'metrics-token-0123456789';
const ROUTES = [
  ['POST', '/graphql'],
  ['POST', '/actions'],
  ['GET', '/health'],
  ['GET', '/ready'],
  ['GET', '/metrics'],
] as const;
const BAD_HOSTS = ['x:99999', '[::1', '%', 'ex ample'];

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The status line and headers as they came, for what no parser should have to forgive. */
  head: string;
}

/** A chunked body's data, without its framing. */
function unchunk(framed: string): string {
  let data = '';
  for (let rest = framed; ;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return data;
    data += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

/**
 * One request written byte for byte on a socket of its own; the final answer (after any 100
 * Continue) once its body is complete or the server closes.
 */
function raw(port: number, request: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let received = '';
    const parse = (): RawAnswer | null => {
      const interim = /^HTTP\/1\.1 1\d\d [^\r]*\r\n\r\n/.exec(received)?.[0] ?? '';
      const answer = received.slice(interim.length);
      const end = answer.indexOf('\r\n\r\n');
      if (end < 0) return null;
      const head = answer.slice(0, end);
      const lines = head.split('\r\n');
      const headers = Object.fromEntries(
        lines.slice(1).map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      const rest = answer.slice(end + 4);
      const chunked = headers['transfer-encoding'] === 'chunked';
      const complete = chunked ? rest.endsWith('0\r\n\r\n') : Buffer.byteLength(rest) >= Number(headers['content-length'] ?? 0);
      if (!complete) return null;
      return { status: Number(lines[0]!.split(' ')[1]), headers, body: chunked ? unchunk(rest) : rest, head: interim + head };
    };
    socket.on('data', (chunk) => {
      received += chunk.toString();
      const answer = parse();
      if (answer) {
        socket.destroy();
        resolve(answer);
      }
    });
    socket.on('close', () => resolve(parse() ?? { status: 0, headers: {}, body: '', head: received }));
    socket.on('error', reject);
    socket.connect(port, '127.0.0.1', () => socket.write(request));
  });
}

const body = JSON.stringify({ query: '{ viewer { role tenantId } }' });

describe('malformed requests are the client’s error', () => {
  let backend: ServedBackend;
  const logged: string[] = [];
  beforeAll(async () => {
    const log = createLogger('debug', { write: (line: string) => void logged.push(line) });
    backend = await serveTestBackend({ env: { NODE_ENV: 'production', ACTION_SECRET: SECRET, METRICS_TOKEN }, log });
    await createTenant(backend, 'ta');
  });
  afterAll(() => backend.close());

  it('answers a Host that is not a valid authority 400 with a code and the request id on every route, logged at debug without a stack', async ({
    annotate,
  }) => {
    const answers: string[] = [];
    for (const host of BAD_HOSTS) {
      for (const [method, path] of ROUTES) {
        const requestId = `bad-host-${answers.length}`;
        const start = logged.length;
        const sent = method === 'POST' ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` : '\r\n';
        const answer = await raw(backend.port, `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: ${requestId}\r\n${sent}`);
        const parsed = JSON.parse(answer.body) as { errors?: { extensions: unknown }[]; extensions?: unknown };
        const extensions = path === '/graphql' ? parsed.errors?.[0]?.extensions : parsed.extensions;
        answers.push(`${host} ${path} ${answer.status}`);
        expect({ host, path, status: answer.status, extensions }).toEqual({
          host,
          path,
          status: 400,
          extensions: { code: 'BAD_USER_INPUT', requestId },
        });
        expect(answer.headers['x-request-id']).toBe(requestId);
        expect(answer.body).not.toMatch(/TypeError|Invalid URL|at \S+ \(|node:internal/);
        const lines = logged.slice(start).map((line) => JSON.parse(line) as { level: string; msg: string; err?: unknown });
        expect(lines.filter((line) => line.level === 'error' || line.level === 'warn' || line.err !== undefined)).toEqual([]);
        expect(lines.some((line) => line.level === 'debug' && /not a valid URL/.test(line.msg))).toBe(true);
      }
    }
    await annotate(
      `bad Host: ${answers.length} requests (${BAD_HOSTS.length} hosts x ${ROUTES.length} routes), statuses ${JSON.stringify([...new Set(answers.map((a) => a.split(' ').at(-1)))])}`,
    );
  });

  it(`answers a request of ${MAX_REQUEST_HEADERS} headers 431 with a code before any session header is read: no tenant pushed past the cut`, async ({
    annotate,
  }) => {
    const before = await backend.sql.query('select count(*)::int as n from tenants');
    // With the 7 headers around them, exactly MAX_REQUEST_HEADERS.
    const filler = Array.from({ length: MAX_REQUEST_HEADERS - 7 }, (_, i) => `x-filler-${i}: ${i}\r\n`).join('');
    const mutation = JSON.stringify({ query: 'mutation { createTenant(input: { id: "via-headers", name: "No" }) { tenant { id } } }' });
    const request = (extra: string) =>
      `POST /graphql HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: many-headers\r\nContent-Type: application/json\r\nx-action-secret: ${SECRET}\r\n` +
      `x-hasura-role: admin\r\n${extra}x-hasura-tenant-id: ta\r\nContent-Length: ${mutation.length}\r\n\r\n${mutation}`;
    const answer = await raw(backend.port, request(filler));
    const parsed = JSON.parse(answer.body) as { errors: { message: string; extensions: Record<string, unknown> }[] };
    await annotate(`${MAX_REQUEST_HEADERS} headers: ${answer.status} ${JSON.stringify(parsed.errors[0])}`);
    expect(answer.status).toBe(431);
    expect(parsed.errors[0]!.extensions).toEqual({ code: 'BAD_USER_INPUT', requestId: 'many-headers' });
    expect(answer.headers['connection']).toBe('close');
    expect((await backend.sql.query('select count(*)::int as n from tenants')).rows).toEqual(before.rows);
    // One header fewer than the cut is served as usual: a tenant admin, who may not create tenants.
    const fewer = await raw(backend.port, request(filler.split('\r\n').slice(1).join('\r\n')));
    expect(fewer.status).toBe(200);
    expect(JSON.parse(fewer.body).errors[0].extensions.code).toBe('FORBIDDEN');
  });

  it('refuses a body over MAX_BODY_BYTES with 413 before sending 100 Continue', async ({ annotate }) => {
    const answer = await raw(
      backend.port,
      `POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\nExpect: 100-continue\r\n\r\n`,
    );
    await annotate(`Expect: 100-continue with a 50 MB body: ${answer.head.split('\r\n')[0]}`);
    expect(answer.head).not.toMatch(/100 Continue/);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT', limit: 'MAX_BODY_BYTES' } }] });
    const small = await raw(
      backend.port,
      `POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nx-action-secret: ${SECRET}\r\nx-hasura-role: operator\r\n\r\n${body}`,
    );
    expect(small.head).toMatch(/^HTTP\/1\.1 100 Continue/);
  });
});

describe('the request URL check', () => {
  const HOST_CHARACTERS = [...'aZ09:.-_~[]@%/?#\\ '];
  const TARGET_CHARACTERS = [...'aZ09:./?#%@[]\\ -'];
  const asRequest = (host: string, url: string) => ({ url, headers: { host } }) as unknown as IncomingMessage;

  it('judges a Host and target as the URL parser does, whatever it remembers of the Host', () => {
    const check = requestUrlCheck();
    const host = fc.oneof(
      fc.constantFrom(...BAD_HOSTS, 'localhost:4000', '127.0.0.1', '[::1]:80'),
      fc.string({ unit: fc.constantFrom(...HOST_CHARACTERS), maxLength: 12 }),
    );
    const target = fc.oneof(
      fc.constant('/'),
      fc.string({ unit: fc.constantFrom(...TARGET_CHARACTERS), maxLength: 12 }).map((path) => `/${path}`),
      fc.constantFrom('*', 'http://x:99999/', 'x'),
    );
    fc.assert(
      fc.property(host, target, target, (host, first, second) => {
        for (const url of [first, second, first])
          expect(check(asRequest(host, url))).toBe(URL.canParse(requestUrlOf(asRequest(host, url))));
      }),
      { numRuns: 5_000 },
    );
  });
});
