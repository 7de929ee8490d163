import { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asUser, createTenant, serveOverHttp, serveTestBackend, type ServedBackend } from './support/harness.js';

/** The limits of the HTTP server on a real socket: media types, MAX_BODY_BYTES, HTTP_REQUEST_TIMEOUT_MS, HTTP_MAX_CONNECTIONS. */
describe('HTTP on a real socket', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend({ env: { MAX_BODY_BYTES: '2000', HTTP_REQUEST_TIMEOUT_MS: '1000', HTTP_MAX_CONNECTIONS: '4' } });
    await createTenant(backend, 'sockets');
  });
  afterAll(() => backend.close());

  it('takes a media type in any case, and its refusals before GraphQL carry the code and the request id', async () => {
    const body = JSON.stringify({ query: '{ viewer { role } }' });
    for (const chunked of [false, true]) {
      const response = await fetch(backend.url, {
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
      const refused = await fetch(backend.url, {
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
      fetch(backend.url, {
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

  it('ends a request whose body arrives too slowly (HTTP_REQUEST_TIMEOUT_MS)', async ({ annotate }) => {
    const socket = new Socket();
    await new Promise<void>((resolve) => socket.connect(backend.port, '127.0.0.1', resolve));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    const started = performance.now();
    socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"qu');
    const at = await Promise.race([closed, sleep(10_000, -1)]);
    expect(at).toBeGreaterThan(0);
    await annotate(`slow body: socket closed after ${(at - started).toFixed(0)} ms`);
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
