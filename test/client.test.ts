import { connect, createServer, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mutate, MutationError, type Transport } from '../src/client/mutate.js';
import { listen } from '../src/http/node-server.js';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { asUser, createContractRow, createTenant, createTestBackend, holdPoolConnection, type TestBackend } from './support/harness.js';
import { listenOnLoopback } from './support/ports.js';

const URL_IN_PROCESS = 'http://test.local/graphql';

describe('the typed client: one change per user action, whatever fails in between', () => {
  let backend: TestBackend;
  let contractId: string;
  const documents = async () =>
    (await backend.sql.query<{ n: number }>("select count(*)::int as n from contract_documents where tenant_id = 'client'")).rows[0]!.n;

  /** The app in process, as a transport: what a fetch over the network would answer. */
  const inProcess: Transport = async (url, init) => {
    const response = await backend.app.fetch(new Request(url, { method: 'POST', headers: init.headers, body: init.body }));
    return { status: response.status, headers: response.headers, body: await response.json() };
  };

  beforeAll(async () => {
    backend = await createTestBackend({ env: { DB_POOL_MAX: '1', MAX_IN_FLIGHT: '2', DB_POOL_ACQUIRE_TIMEOUT_MS: '150' } });
    await createTenant(backend, 'client');
    contractId = await createContractRow(backend, 'client');
  });
  afterAll(() => backend.close());

  const create = (options: Partial<Parameters<typeof mutate>[2]> = {}) =>
    mutate(
      CreateContractDocumentDocument,
      { input: { contractId } },
      { url: URL_IN_PROCESS, headers: asUser('client'), transport: inProcess, ...options },
    );

  it('resends a mutation whose answer was lost with the same key, and gets the stored answer', async () => {
    const before = await documents();
    let sent = 0;
    const lossy: Transport = async (url, init) => {
      const answer = await inProcess(url, init);
      if (++sent === 1) throw new Error('socket hang up');
      return answer;
    };
    const result = await create({ transport: lossy });
    expect(result).toMatchObject({ replayed: true, attempts: 2 });
    expect(await documents()).toBe(before + 1);
  });

  it('rides out an exhausted pool, never resending sooner than the server asked', async () => {
    const before = await documents();
    const pauses: number[] = [];
    // The pool is given back once the client has been told TRY_AGAIN and pauses before its resend.
    const holder = holdPoolConnection(backend, 60_000);
    await holder.held;
    const result = await create({
      baseDelayMs: 1,
      sleep: async (ms) => {
        pauses.push(ms);
        holder.release();
        await sleep(ms);
      },
    });
    await holder.done;
    expect(result.attempts).toBeGreaterThan(1);
    expect(result.replayed).toBe(false);
    expect(pauses.length).toBe(result.attempts - 1);
    // TRY_AGAIN after a pool wait of DB_POOL_ACQUIRE_TIMEOUT_MS says retryAfterMs: 150.
    expect(Math.min(...pauses)).toBeGreaterThanOrEqual(150);
    expect(await documents()).toBe(before + 1);
  });

  it('rides out a server that is not taking connections yet', async () => {
    const before = await documents();
    const server = await listen(backend.app, 0, backend.log, '127.0.0.1', backend.config.server);
    // In front of it, a port that resets the first connections (a server still starting, behind
    // a balancer), then carries the rest through.
    let refused = 0;
    const front = await listenOnLoopback(
      createServer((socket) => {
        if (refused < 2) {
          refused++;
          socket.resetAndDestroy();
          return;
        }
        const upstream = connect(server.port, '127.0.0.1');
        socket.pipe(upstream).pipe(socket);
        upstream.on('error', () => socket.destroy());
        socket.on('error', () => upstream.destroy());
      }),
    );
    const port = front.port;
    try {
      const result = await mutate(
        CreateContractDocumentDocument,
        { input: { contractId } },
        {
          url: `http://127.0.0.1:${port}/graphql`,
          headers: asUser('client'),
          baseDelayMs: 50,
        },
      );
      expect(result.attempts).toBeGreaterThan(1);
      expect(refused).toBe(2);
      expect(await documents()).toBe(before + 1);
    } finally {
      await front.close();
      await server.close();
    }
  });

  it('does not resend a refusal, and gives up at its deadline', async () => {
    const refused = mutate(
      CreateContractDocumentDocument,
      { input: { contractId: '00000000-0000-4000-8000-000000000000' } },
      {
        url: URL_IN_PROCESS,
        headers: asUser('client'),
        transport: inProcess,
      },
    );
    await expect(refused).rejects.toMatchObject({ name: 'MutationError', code: 'NOT_FOUND', attempts: 1 });
    const before = await documents();
    const holder = holdPoolConnection(backend, 60_000);
    await holder.held;
    const started = performance.now();
    const gaveUp = await create({ deadlineMs: 600 }).catch((error: unknown) => error);
    const waited = performance.now() - started;
    holder.release();
    await holder.done;
    expect(gaveUp).toBeInstanceOf(MutationError);
    expect(gaveUp).toMatchObject({ code: 'TRY_AGAIN' });
    expect(waited).toBeLessThan(1_500);
    expect(await documents()).toBe(before);
  });

  it('returns by its deadline from a server that accepts and never answers (an attempt in flight is aborted)', async () => {
    // A frozen process looks like this from outside: the kernel accepts, nothing ever answers.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const deadlineMs = 3_000;
    const started = performance.now();
    try {
      const outcome = await Promise.race([
        create({ url: `http://127.0.0.1:${port}/graphql`, transport: undefined, deadlineMs }).catch((error: unknown) => error),
        sleep(deadlineMs + 15_000, 'still waiting' as const),
      ]);
      const tookMs = performance.now() - started;
      expect(outcome).toBeInstanceOf(MutationError);
      expect(outcome).toMatchObject({ code: 'DEADLINE', attempts: 1 });
      expect(tookMs).toBeGreaterThanOrEqual(deadlineMs - 50);
      // Timers on a busy machine run late; an attempt without a limit would still be waiting.
      expect(tookMs).toBeLessThan(deadlineMs + 2_000);
      expect(sockets.size).toBeGreaterThan(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
