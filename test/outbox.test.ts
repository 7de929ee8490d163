import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimBatch, deliverClaim, relayOnce, webhookSink, type OutboxSink, type RelayDeps } from '../src/outbox/outbox.js';
import { loadConfig } from '../src/config.js';
import { startBackend } from '../src/server.js';
import { OutboxStatsDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'relay';

function recordingSink(delayMs = 0): OutboxSink & { delivered: string[] } {
  const delivered: string[] = [];
  return {
    name: 'recording',
    delivered,
    async deliver(event) {
      if (delayMs) await sleep(delayMs);
      delivered.push(event.id);
    },
  };
}

describe('the outbox relay', () => {
  let backend: TestBackend;
  const deps = (sink: OutboxSink, options: Partial<RelayDeps['options']> = {}): RelayDeps => ({
    db: backend.database.db,
    transactions: backend.services.transactions,
    sink,
    log: backend.log,
    options: { batchSize: 50, leaseMs: 30_000, maxAttempts: 3, retryBaseDelayMs: 1, retryMaxDelayMs: 2, ...options },
  });
  const plant = async (count: number) => {
    await backend.sql.query(
      `insert into outbox_events (tenant_id, topic, payload) select $1, 'coupon.issued', jsonb_build_object('n', g) from generate_series(1, $2) g`,
      [TENANT, count],
    );
  };
  const statuses = async () =>
    Object.fromEntries(
      (
        await backend.sql.query<{ status: string; n: number }>(
          'select status, count(*)::int as n from outbox_events where tenant_id = $1 group by status',
          [TENANT],
        )
      ).rows.map((r) => [r.status, r.n]),
    );
  /** Makes every pending event due now, as if its retry delay or lease had passed. */
  const makeDue = () => backend.sql.query("update outbox_events set next_attempt_at = now() where status = 'pending'");

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT);
  });
  beforeEach(() => backend.sql.query('delete from outbox_events'));
  afterAll(() => backend.close());

  it('two relays running side by side deliver every event exactly once', async () => {
    await plant(300);
    const sinks = [recordingSink(1), recordingSink(1)];
    const relay = async (sink: OutboxSink) => {
      while ((await relayOnce(deps(sink, { batchSize: 20 }))).claimed > 0);
    };
    await Promise.all(sinks.map(relay));
    const all = [...sinks[0]!.delivered, ...sinks[1]!.delivered];
    expect(all).toHaveLength(300);
    expect(new Set(all).size).toBe(300);
    expect(sinks[0]!.delivered.length).toBeGreaterThan(0);
    expect(sinks[1]!.delivered.length).toBeGreaterThan(0);
    expect(await statuses()).toEqual({ sent: 300 });
  });

  it('retries a failing sink later, loses nothing, and marks an event dead after the last attempt', async () => {
    await plant(2);
    let failures = 1;
    const flaky: OutboxSink & { delivered: string[] } = {
      name: 'flaky',
      delivered: [],
      async deliver(event) {
        if (failures-- > 0) throw new Error('sink unavailable');
        this.delivered.push(event.id);
      },
    };
    const first = await relayOnce(deps(flaky));
    expect(first).toMatchObject({ claimed: 2, sent: 1, retried: 1, dead: 0 });
    const failed = await backend.sql.query("select attempts, last_error from outbox_events where status = 'pending'");
    expect(failed.rows).toEqual([{ attempts: 1, last_error: 'Error: sink unavailable' }]);
    await makeDue();
    expect(await relayOnce(deps(flaky))).toMatchObject({ claimed: 1, sent: 1 });
    expect(await statuses()).toEqual({ sent: 2 });

    await plant(1);
    const broken: OutboxSink = { name: 'broken', deliver: async () => Promise.reject(new Error('down')) };
    for (let attempt = 1; attempt <= 3; attempt++) {
      await makeDue();
      await relayOnce(deps(broken));
    }
    expect(await statuses()).toEqual({ sent: 2, dead: 1 });
    await makeDue();
    expect((await relayOnce(deps(broken))).claimed).toBe(0);
  });

  it('a relay that dies in the middle of a batch leaves its events to the next relay', async () => {
    await plant(10);
    // The first relay claims and is never heard from again: its delivery never finishes.
    const hanging: OutboxSink = { name: 'hanging', deliver: () => new Promise<void>(() => {}) };
    const dead = deps(hanging, { leaseMs: 200 });
    const claim = await claimBatch(dead);
    expect(claim.events).toHaveLength(10);
    void deliverClaim(dead, claim);

    const next = recordingSink();
    expect((await relayOnce(deps(next))).claimed).toBe(0); // still leased
    await sleep(300);
    expect(await relayOnce(deps(next))).toMatchObject({ claimed: 10, sent: 10 });
    expect(next.delivered.sort()).toEqual(claim.events.map((e) => e.id).sort());
    expect(await statuses()).toEqual({ sent: 10 });
  });

  it('posts to the webhook with the event id as Idempotency-Key', async () => {
    const received: { key: string | undefined; body: { id: string; topic: string } }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ key: req.headers['idempotency-key'] as string | undefined, body: JSON.parse(body) });
        res.writeHead(received.length === 1 ? 503 : 204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await plant(1);
      const sink = webhookSink(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, 2_000);
      expect(await relayOnce(deps(sink))).toMatchObject({ retried: 1 }); // the 503
      await makeDue();
      expect(await relayOnce(deps(sink))).toMatchObject({ sent: 1 });
      const { rows } = await backend.sql.query<{ id: string }>('select id from outbox_events where tenant_id = $1', [TENANT]);
      expect(received.map((r) => r.key)).toEqual([rows[0]!.id, rows[0]!.id]);
      expect(received[1]!.body).toMatchObject({ id: rows[0]!.id, topic: 'coupon.issued' });
    } finally {
      server.close();
    }
  });

  it('startBackend (npm start) runs a relay by default', async () => {
    await plant(5);
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: backend.databaseUrl, PORT: '0', OUTBOX_POLL_INTERVAL_MS: '20' });
    const running = await startBackend({ config, log: backend.log, host: '127.0.0.1' });
    try {
      for (const deadline = Date.now() + 10_000; (await statuses())['pending'] && Date.now() < deadline;) await sleep(20);
      expect(await statuses()).toEqual({ sent: 5 });
    } finally {
      await running.stop();
    }
  });

  it('outboxStats gives pending, dead and the oldest pending age to admins only', async () => {
    await plant(3);
    await backend.sql.query("update outbox_events set status = 'dead' where id = (select id from outbox_events limit 1)");
    await backend.sql.query("update outbox_events set created_at = now() - interval '90 seconds' where status = 'pending'");
    const stats = (await gqlOk(backend.app.fetch, OutboxStatsDocument, {}, asTenantAdmin(TENANT))).outboxStats;
    expect(stats.pending).toBe(2);
    expect(stats.dead).toBe(1);
    expect(stats.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(90);
    expect(errorCodes(await gql(backend.app.fetch, OutboxStatsDocument, {}, asUser(TENANT)))).toEqual(['FORBIDDEN']);
  });
});
