import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { countDead, requeueDead } from '../src/features/outbox/housekeeping.js';
import { claimBatch, deliverClaim, relayHealth, relayOnce, type RelayDeps } from '../src/features/outbox/relay.js';
import { webhookSink, type OutboxSink } from '../src/features/outbox/sinks.js';
import { loadConfig } from '../src/core/config.js';
import { startBackend } from '../src/entry/backend.js';
import { OutboxStatsDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';
import { listenOnLoopback } from './support/ports.js';
import { captureLog } from './support/log-capture.js';
import { runScript } from './support/scripts.js';

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
    options: { batchSize: 50, leaseMs: 30_000, retryForMs: 3_600_000, maxAttempts: 3, retryBaseDelayMs: 1, retryMaxDelayMs: 2, ...options },
    health: relayHealth(),
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
    const receiver = await listenOnLoopback(server);
    try {
      await plant(1);
      const sink = webhookSink(`${receiver.origin}/hook`, 2_000);
      expect(await relayOnce(deps(sink))).toMatchObject({ retried: 1 }); // the 503
      await makeDue();
      expect(await relayOnce(deps(sink))).toMatchObject({ sent: 1 });
      const { rows } = await backend.sql.query<{ id: string }>('select id from outbox_events where tenant_id = $1', [TENANT]);
      expect(received.map((r) => r.key)).toEqual([rows[0]!.id, rows[0]!.id]);
      expect(received[1]!.body).toMatchObject({ id: rows[0]!.id, topic: 'coupon.issued' });
    } finally {
      await receiver.close();
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

  it('an event is dead once OUTBOX_RETRY_FOR has passed since it was written, however few its attempts; the log counts the dead', async () => {
    await plant(3);
    await backend.sql.query(
      "update outbox_events set created_at = now() - interval '2 hours' where id in (select id from outbox_events limit 2)",
    );
    const captured = captureLog();
    const broken: OutboxSink = { name: 'broken', deliver: async () => Promise.reject(new Error('down')) };
    const hour = { retryForMs: 3_600_000, maxAttempts: null, retryBaseDelayMs: 600_000, retryMaxDelayMs: 600_000 };
    expect(await relayOnce({ ...deps(broken, hour), log: captured.logger })).toMatchObject({ claimed: 3, retried: 1, dead: 2 });
    expect(await statuses()).toEqual({ pending: 1, dead: 2 });
    await new Promise((resolve) => captured.logger.flush(resolve));
    expect(captured.lines.find((line) => line['dead'] === 2)).toMatchObject({
      level: 'error',
      totalDead: 2,
      msg: 'outbox events failed for all of OUTBOX_RETRY_FOR and are now dead; npm run outbox:requeue gives them back',
    });
    // The last attempt falls at the end of the budget, not a whole backoff past it.
    await backend.sql.query(
      "update outbox_events set created_at = now() - interval '59 minutes', next_attempt_at = now() where status = 'pending'",
    );
    await relayOnce(deps(broken, hour));
    const { rows } = await backend.sql.query<{ late: boolean }>(
      "select next_attempt_at <= created_at + interval '1 hour' as late from outbox_events where status = 'pending'",
    );
    expect(rows).toEqual([{ late: true }]);
  });

  it('a delivery brings forward the retries an outage failed, never one the receiver refuses after it came back', async () => {
    await plant(3);
    const ids = (await backend.sql.query<{ id: string }>('select id from outbox_events order by id')).rows.map((r) => r.id);
    const [refused, accepted, waiting] = ids as [string, string, string];
    let up = false;
    const receiver: OutboxSink = {
      name: 'receiver',
      async deliver(event) {
        if (!up || event.id === refused) throw new Error('503');
      },
    };
    // Retries a minute away: brought forward, they are due at once; left alone, they wait.
    const relay = deps(receiver, { retryBaseDelayMs: 60_000, retryMaxDelayMs: 60_000 });
    expect(await relayOnce(relay)).toMatchObject({ claimed: 3, sent: 0 });
    up = true;
    await backend.sql.query('update outbox_events set next_attempt_at = now() where id = any($1)', [[refused, accepted]]);
    expect(await relayOnce(relay)).toMatchObject({ claimed: 2, sent: 1 });
    const due = async (id: string) =>
      (await backend.sql.query<{ due: boolean }>('select next_attempt_at <= now() as due from outbox_events where id = $1', [id])).rows[0]!
        .due;
    expect(await due(waiting)).toBe(true);
    expect(await due(refused)).toBe(false);
  });

  it('requeue gives dead events back by tenant, topic and age, with a fresh budget; the command line says what it did', async () => {
    await createTenant(backend, 'relay-other').catch(() => undefined);
    await backend.sql.query(
      `insert into outbox_events (tenant_id, topic, payload, status, attempts, created_at) values
         ($1, 'coupon.issued', '{}', 'dead', 12, now() - interval '3 hours'),
         ($1, 'coupon.voided', '{}', 'dead', 12, now() - interval '3 hours'),
         ($1, 'coupon.issued', '{}', 'dead', 12, now() - interval '10 minutes'),
         ('relay-other', 'coupon.issued', '{}', 'dead', 12, now() - interval '3 hours')`,
      [TENANT],
    );
    const filter = { tenantId: TENANT, topic: 'coupon.issued', olderThanMs: 3_600_000 };
    expect(await countDead(backend.database.db, filter)).toBe(1);
    expect(await countDead(backend.database.db, { tenantId: TENANT, newerThanMs: 3_600_000 })).toBe(1);
    expect(await requeueDead(backend.database.db, filter)).toBe(1);
    const { rows } = await backend.sql.query(
      "select topic, attempts, requeued_at is not null as requeued, next_attempt_at <= now() as due from outbox_events where tenant_id = $1 and status = 'pending'",
      [TENANT],
    );
    expect(rows).toEqual([{ topic: 'coupon.issued', attempts: 0, requeued: true, due: true }]);

    const env = { DATABASE_URL: backend.databaseUrl };
    const dry = await runScript('src/entry/cli/outbox-requeue.ts', env, ['--tenant', TENANT, '--dry-run']);
    expect(dry.output).toContain(`2 dead events would be given back (tenant ${TENANT})`);
    expect(await countDead(backend.database.db, { tenantId: TENANT })).toBe(2);
    const bad = await runScript('src/entry/cli/outbox-requeue.ts', env, ['--older-than', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('--older-than needs an age such as 30m, 12h or 3d, got "yesterday"');
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
