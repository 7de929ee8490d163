import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { asUser, createContractRow, createTenant, createTestBackend, serveTestBackend, type TestBackend } from './support/harness.js';
import { waitFor, waitForLockWaiter } from './support/wait.js';

const TENANT = 'drain';
/** The idle-connection test's documents: the first test counts the documents of TENANT. */
const IDLE_TENANT = 'drain-idle';

interface Answer {
  status: number;
  connection: string | undefined;
  keepAlive: string | undefined;
  reused: boolean;
  body: string;
}

/** One request through `agent` (a keep-alive pool, as load balancers and HTTP clients keep), or on a fresh connection. */
function request(url: string, agent: http.Agent | false, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const req = http.request(
      url,
      {
        agent,
        method: init.method ?? 'GET',
        headers: {
          ...(init.body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(init.body) } : {}),
          ...init.headers,
        },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            connection: res.headers.connection,
            keepAlive: res.headers['keep-alive'] as string | undefined,
            reused: req.reusedSocket,
            body,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

const openConnections = (server: { server: http.Server }) =>
  new Promise<number>((resolve) => server.server.getConnections((_error, count) => resolve(count ?? 0)));

/** How a request on a fresh connection ends: its status, or the code of its failure. */
const probe = (url: string) =>
  request(url, false).then(
    (answer) => String(answer.status),
    (error: NodeJS.ErrnoException) => error.code ?? 'error',
  );

describe('draining the HTTP server', () => {
  let backend: TestBackend;
  let contractId: string;
  let idleContractId: string;
  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT);
    contractId = await createContractRow(backend, TENANT);
    await createTenant(backend, IDLE_TENANT);
    idleContractId = await createContractRow(backend, IDLE_TENANT);
  });
  afterAll(() => backend.close());

  /** A server of its own: a drain is for good, and its app's /ready stays failed. */
  const drainable = () => serveTestBackend({ databaseUrl: backend.databaseUrl });

  const documentRequest = (id = contractId) =>
    JSON.stringify({ query: print(CreateContractDocumentDocument), variables: { input: { contractId: id } } });

  it('fails /ready at once, closes every connection after its answer, accepts through the grace period, and answers the request in flight', async () => {
    const { url, server, origin, close } = await drainable();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const holder = await backend.sql.connect();
    try {
      // The tenant's sequence row exists after a first document; holding it keeps the next one in flight.
      expect((await request(url, agent, { method: 'POST', body: documentRequest(), headers: asUser(TENANT) })).status).toBe(200);
      expect((await request(`${origin}/health`, agent)).connection).toBe('keep-alive');
      await holder.query('begin');
      await holder.query('select * from document_sequences where tenant_id = $1 for update', [TENANT]);
      const inFlight = request(url, false, { method: 'POST', body: documentRequest(), headers: asUser(TENANT) });
      inFlight.catch(() => undefined);
      await waitForLockWaiter(backend, 20_000);

      const graceMs = 3_000;
      const began = Date.now();
      const drained = server.drain({ graceMs, timeoutMs: 20_000 });
      const ready = await request(`${origin}/ready`, false);
      expect({ status: ready.status, body: JSON.parse(ready.body) }).toEqual({ status: 503, body: { status: 'draining' } });
      // In the grace period the idle keep-alive connection is still open (a load balancer may still
      // send on it): a client reusing it is answered, and told to close it.
      const reused = await request(`${origin}/health`, agent);
      expect(reused).toMatchObject({ status: 200, reused: true, connection: 'close' });
      // A new connection in the grace period is accepted too.
      const fresh = await request(`${origin}/health`, false);
      expect(fresh).toMatchObject({ status: 200, connection: 'close' });

      await holder.query('commit');
      const answered = await inFlight;
      expect(answered).toMatchObject({ status: 200, connection: 'close' });
      expect(JSON.parse(answered.body).data.createContractDocument.document.docNumber).toBe(10_000_001);

      let refusedAt: number | null = null;
      while (refusedAt === null) {
        if ((await probe(`${origin}/health`)) === 'ECONNREFUSED') refusedAt = Date.now();
        else await sleep(50);
      }
      expect(refusedAt - began).toBeGreaterThanOrEqual(graceMs);
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
      agent.destroy();
      await close();
    }
  });

  it('when the server stops, closes idle keep-alive connections with the listener, lets the request in flight finish, and ends with its answer', async () => {
    const { url, server, origin, close } = await drainable();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const holder = await backend.sql.connect();
    try {
      let idle: Socket | null = null;
      const first = http.get(`${origin}/health`, { agent }, (res) => res.resume());
      first.once('socket', (socket) => (idle = socket));
      await new Promise((resolve) => first.once('close', resolve));
      const idleClosed = new Promise<'closed'>((resolve) => idle!.once('close', () => resolve('closed')));
      // A request held in flight by a row lock while the drain begins.
      await request(url, false, { method: 'POST', body: documentRequest(idleContractId), headers: asUser(IDLE_TENANT) });
      await holder.query('begin');
      await holder.query('select * from document_sequences where tenant_id = $1 for update', [IDLE_TENANT]);
      const inFlight = request(url, false, { method: 'POST', body: documentRequest(idleContractId), headers: asUser(IDLE_TENANT) });
      inFlight.catch(() => undefined);
      await waitForLockWaiter(backend, 20_000);

      // HTTP_KEEP_ALIVE_TIMEOUT_MS (65 s) and this drain timeout are far off: only the drain closes the idle one.
      // (graceMs 0, as after SIGINT: the listener closes at once.)
      const drained = server.drain({ graceMs: 0, timeoutMs: 60_000 });
      expect(await Promise.race([idleClosed, sleep(10_000, 'still open' as const)])).toBe('closed');
      await holder.query('commit');
      expect(await inFlight).toMatchObject({ status: 200, connection: 'close' });
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
      agent.destroy();
      await close();
    }
  });

  it('a process replaced while the others serve drains with /ready at 200: its answers close their connections, the server stays ready', async () => {
    const { server, close } = await drainable();
    // A health check whose request is on its way in when the drain begins (graceMs 0: nothing new is accepted).
    const check = connect(server.port, '127.0.0.1');
    check.on('error', () => undefined);
    try {
      await new Promise((resolve) => check.once('connect', resolve));
      let answer = '';
      check.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      const ended = new Promise((resolve) => check.once('close', resolve));
      check.write('GET /ready HTTP/1.1\r\nHost: localhost\r\n');
      await waitFor(async () => ((await openConnections(server)) === 1 ? true : undefined), 'the connection accepted');
      const drained = server.drain({ graceMs: 0, timeoutMs: 60_000, failReady: false });
      check.write('\r\n');
      await ended;
      // The head, then the body (chunked or not).
      const [head, body] = answer.split('\r\n\r\n');
      expect({
        status: head!.split(' ')[1],
        closes: /\r\nconnection: close\r\n/i.test(head! + '\r\n'),
        ready: body!.includes('{"status":"ready"}'),
      }).toEqual({ status: '200', closes: true, ready: true });
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      check.destroy();
      await close();
    }
  });

  it('closes what is still open when HTTP_DRAIN_TIMEOUT_MS runs out, and says how much', async () => {
    const { server, close } = await drainable();
    // A request whose headers are still arriving: in flight, not idle.
    const slow = connect(server.port, '127.0.0.1');
    slow.on('error', () => undefined);
    try {
      await new Promise((resolve) => slow.once('connect', resolve));
      slow.write('GET /health HTTP/1.1\r\nHost: localhost\r\n');
      await waitFor(
        async () =>
          (await new Promise<number>((resolve) => server.server.getConnections((_e, n) => resolve(n)))) === 1 ? true : undefined,
        'the connection accepted',
      );
      expect(await server.drain({ graceMs: 0, timeoutMs: 200 })).toEqual({ forced: 1 });
    } finally {
      slow.destroy();
      await close();
    }
  });
});

describe('keep-alive', () => {
  it('announces HTTP_KEEP_ALIVE_TIMEOUT_MS, and an idle connection outlives HTTP_REQUEST_TIMEOUT_MS (headers are timed only once a request begins)', async () => {
    const backend = await serveTestBackend({ env: { HTTP_REQUEST_TIMEOUT_MS: '1000' } });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await request(`${backend.origin}/health`, agent);
      expect(first).toMatchObject({ status: 200, connection: 'keep-alive', keepAlive: 'timeout=65' });
      // Idle for longer than the request timeout and Node's check of it (every second).
      await sleep(2_500);
      expect(await request(`${backend.origin}/health`, agent)).toMatchObject({ status: 200, reused: true });
    } finally {
      agent.destroy();
      await backend.close();
    }
  });
});
