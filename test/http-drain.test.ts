import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { asUser, createContractRow, createTenant, createTestBackend, serveTestBackend, type TestBackend } from './support/harness.js';
import { waitForLockWaiter } from './support/wait.js';

const TENANT = 'drain';

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

/** How a request on a fresh connection ends: its status, or the code of its failure. */
const probe = (url: string) =>
  request(url, false).then(
    (answer) => String(answer.status),
    (error: NodeJS.ErrnoException) => error.code ?? 'error',
  );

describe('draining the HTTP server', () => {
  let backend: TestBackend;
  let contractId: string;
  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT);
    contractId = await createContractRow(backend, TENANT);
  });
  afterAll(() => backend.close());

  /** A server of its own: a drain is for good, and its app's /ready stays failed. */
  const drainable = () => serveTestBackend({ databaseUrl: backend.databaseUrl });

  const documentRequest = () => JSON.stringify({ query: print(CreateContractDocumentDocument), variables: { input: { contractId } } });

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
      // The idle keep-alive connection is still open: a client reusing it is answered, and told to close it.
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

  it('never closes an idle keep-alive connection its client may reuse: the client that does is answered', async () => {
    const { server, origin, close } = await drainable();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await request(`${origin}/health`, agent)).connection).toBe('keep-alive');
      let done = false;
      const drained = server.drain({ graceMs: 0, timeoutMs: 60_000 }).finally(() => (done = true));
      for (const deadline = Date.now() + 10_000; server.server.listening && Date.now() < deadline;) await sleep(10);
      expect(server.server.listening).toBe(false);
      expect(await probe(`${origin}/health`)).toBe('ECONNREFUSED');
      // The listener is closed; the idle connection is not, however long the client leaves it.
      await sleep(300);
      expect(done).toBe(false);
      const reused = await request(`${origin}/health`, agent);
      expect(reused).toMatchObject({ status: 200, reused: true, connection: 'close' });
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      agent.destroy();
      await close();
    }

    // What Node's own close does instead: it closes the idle connection at once, and the client
    // that meant to reuse it gets no answer.
    const naive = await drainable();
    const naiveAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await request(`${naive.origin}/health`, naiveAgent)).connection).toBe('keep-alive');
      const closed = new Promise((resolve) => naive.server.server.close(resolve));
      await expect(request(`${naive.origin}/health`, naiveAgent)).rejects.toThrow();
      await closed;
    } finally {
      naiveAgent.destroy();
      await naive.close();
    }
  });

  it('a process replaced while the others serve drains with /ready at 200: its answers close their connections, the server stays ready', async () => {
    const { server, origin, close } = await drainable();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await request(`${origin}/ready`, agent)).connection).toBe('keep-alive');
      const drained = server.drain({ graceMs: 0, timeoutMs: 60_000, failReady: false });
      const ready = await request(`${origin}/ready`, agent);
      expect({ status: ready.status, body: JSON.parse(ready.body), connection: ready.connection }).toEqual({
        status: 200,
        body: { status: 'ready' },
        connection: 'close',
      });
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      agent.destroy();
      await close();
    }
  });

  it('closes what is still open when HTTP_DRAIN_TIMEOUT_MS runs out, and says how much', async () => {
    const { server, origin, close } = await drainable();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await request(`${origin}/health`, agent);
      expect(await server.drain({ graceMs: 0, timeoutMs: 200 })).toEqual({ forced: 1 });
    } finally {
      agent.destroy();
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
