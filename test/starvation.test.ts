import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { startWorkers, type Workers } from '../src/entry/worker/index.js';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { LoadClient } from './load/client.js';
import { asUser, createContractRow, createTenant, createTestBackend, serveOverHttp, type TestBackend } from './support/harness.js';

/**
 * Health and background work cannot be starved by requests: one member floods
 * createContractDocument while a slow writer holds the tenant's numbering row now and then, so
 * every flooding transaction waits on that row holding its connection and the pool stays taken
 * for a second and more at a time, longer than a wait for a connection may last. Meanwhile /ready
 * is polled and outbox events keep arriving: /ready answers from the health check's own
 * connection and the relay runs on connections of its own, so neither notices.
 */
const FLOOD_MS = 8_000;
const FLOODING_CLIENTS = 48;
const SLOW_WRITER_HOLDS_MS = 1_500;

describe('a member flooding the server', () => {
  let backend: TestBackend;
  let workers: Workers;
  const lines: { msg?: string; worker?: string }[] = [];

  beforeAll(async () => {
    backend = await createTestBackend({
      env: {
        DB_POOL_MAX: '4',
        MAX_IN_FLIGHT: '4',
        DB_POOL_ACQUIRE_TIMEOUT_MS: '1000',
        // The flood waits for the slow writer instead of giving up on the lock.
        LOCK_TIMEOUT_MS: '3000',
        DB_HEALTH_CHECK_INTERVAL_MS: '200',
        OUTBOX_POLL_INTERVAL_MS: '50',
      },
      log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }),
    });
    await createTenant(backend, 'flood');
    workers = startWorkers(backend.services);
  });
  afterAll(async () => {
    await workers.stop();
    await backend.close();
  });

  it('leaves /ready at 200 and the outbox relay delivering, without a failed pass', async ({ annotate }) => {
    const contractId = await createContractRow(backend, 'flood');
    const { url, server } = await serveOverHttp(backend);
    const client = new LoadClient(url, FLOODING_CLIENTS + 1);
    await client.open();
    const readyUrl = url.replace(/\/graphql$/, '/ready');
    const document = print(CreateContractDocumentDocument);
    const floodCodes: Record<string, number> = {};
    const readiness: number[] = [];
    const events: string[] = [];
    const started = performance.now();
    const during = () => performance.now() - started < FLOOD_MS;

    const flood = Array.from({ length: FLOODING_CLIENTS }, async () => {
      while (during()) {
        const reply = await client.graphql(document, { input: { contractId } }, asUser('flood', 'flooder'));
        const code = String(reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');
        floodCodes[code] = (floodCodes[code] ?? 0) + 1;
      }
    });
    const poll = (async () => {
      while (during()) {
        readiness.push((await fetch(readyUrl)).status);
        await sleep(100);
      }
    })();
    const slowWriter = (async () => {
      await sleep(500);
      while (performance.now() - started < FLOOD_MS - SLOW_WRITER_HOLDS_MS) {
        const held = await backend.sql.connect();
        try {
          await held.query('begin');
          await held.query("select 1 from document_sequences where tenant_id = 'flood' for update");
          await sleep(SLOW_WRITER_HOLDS_MS);
          await held.query('commit');
        } finally {
          held.release();
        }
        await sleep(500);
      }
    })();
    // Events keep arriving from elsewhere (another process's commits) while the flood runs.
    const arrivals = (async () => {
      while (performance.now() - started < FLOOD_MS - 1_000) {
        const { rows } = await backend.sql.query<{ id: string }>(
          "insert into outbox_events (tenant_id, topic, payload) values ('flood', 'test.flood', '{}') returning id",
        );
        events.push(rows[0]!.id);
        await sleep(200);
      }
    })();
    await Promise.all([...flood, poll, arrivals, slowWriter]);
    const { rows } = await backend.sql.query<{ status: string; n: number; slowest: number | null }>(
      `select status, count(*)::int as n, max(extract(epoch from sent_at - created_at) * 1000)::int as slowest
         from outbox_events where id = any($1::uuid[]) group by status`,
      [events],
    );
    client.close();
    await server.close();

    const passFailures = lines.filter((line) => line.msg === 'worker pass failed; will try again');
    await annotate(
      `flood of ${FLOODING_CLIENTS} clients for ${FLOOD_MS} ms: answers ${JSON.stringify(floodCodes)}; ` +
        `/ready ${JSON.stringify(Object.fromEntries([200, 503].map((s) => [s, readiness.filter((r) => r === s).length])))}; ` +
        `outbox ${JSON.stringify(rows)} of ${events.length} events; failed relay passes ${passFailures.length}`,
    );
    // The flood did fill the server: some of the flooder's own requests were turned away.
    expect(floodCodes['TRY_AGAIN']).toBeGreaterThan(0);
    expect(floodCodes['OK']).toBeGreaterThan(0);
    expect(readiness.length).toBeGreaterThan(10);
    expect(readiness.filter((status) => status !== 200)).toEqual([]);
    expect(passFailures).toEqual([]);
    expect(rows.map((row) => [row.status, row.n])).toEqual([['sent', events.length]]);
  });
});
