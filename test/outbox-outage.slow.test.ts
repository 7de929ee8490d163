import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayHealth, relayOnce, type PassResult, type RelayDeps, type RelayOptions } from '../src/features/outbox/relay.js';
import { webhookSink } from '../src/features/outbox/sinks.js';
import { loop } from '../src/entry/worker/index.js';
import { countingRelayOnce } from './naive/outbox-relay.js';
import { createTenant, createTestBackend, type TestBackend } from './support/harness.js';
import { listenOnLoopback } from './support/ports.js';
import { runScript } from './support/scripts.js';

/**
 * A webhook receiver that is down for a while and then takes everything, with the relay running
 * as the worker runs it. Times are scaled from the defaults (backoff 1 s to 5 min, retried for
 * 72 h) so that an outage well past what a count of 10 attempts survives fits in seconds: backoff
 * from 5 ms to 3 s, so that ten attempts wait about 2.5 s in all (plus the passes themselves, a
 * few hundred milliseconds each on a busy machine), and an outage of 10 s. Two batches of events.
 */
const OUTAGE_MS = 10_000;
const EVENTS = 20;
const OPTIONS: RelayOptions = {
  batchSize: 10,
  leaseMs: 30_000,
  retryForMs: 120_000,
  maxAttempts: null,
  retryBaseDelayMs: 5,
  retryMaxDelayMs: 3_000,
};
const POLL_MS = 20;

interface Receiver {
  url: string;
  down: boolean;
  /** When each event was first taken, in performance.now() time. */
  taken: Map<string, number>;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const receiver = { down: true, taken: new Map<string, number>() } as Receiver;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (receiver.down) return res.writeHead(503).end();
      const { id } = JSON.parse(body) as { id: string };
      if (!receiver.taken.has(id)) receiver.taken.set(id, performance.now());
      res.writeHead(204).end();
    });
  });
  const listening = await listenOnLoopback(server);
  receiver.url = `${listening.origin}/hook`;
  receiver.close = listening.close;
  return receiver;
}

describe('the outbox through a receiver outage longer than a count of attempts survives', () => {
  let backend: TestBackend;
  let receiver: Receiver;
  beforeAll(async () => {
    backend = await createTestBackend();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await backend.close();
  });

  const statuses = async (tenantId: string) =>
    Object.fromEntries(
      (
        await backend.sql.query<{ status: string; n: number }>(
          'select status, count(*)::int as n from outbox_events where tenant_id = $1 group by status',
          [tenantId],
        )
      ).rows.map((r) => [r.status, r.n]),
    );

  /**
   * Events written when the receiver goes down, the relay passing as the worker does, the receiver
   * back after OUTAGE_MS; until no event is pending. When each event got through, after the recovery.
   */
  async function outage(tenantId: string, pass: (deps: RelayDeps) => Promise<PassResult>) {
    await createTenant(backend, tenantId);
    await backend.sql.query(
      `insert into outbox_events (tenant_id, topic, payload) select $1, 'coupon.issued', jsonb_build_object('n', g) from generate_series(1, $2) g`,
      [tenantId, EVENTS],
    );
    const ids = (await backend.sql.query<{ id: string }>('select id from outbox_events where tenant_id = $1', [tenantId])).rows.map(
      (r) => r.id,
    );
    const deps: RelayDeps = {
      db: backend.database.db,
      transactions: backend.services.transactions,
      sink: webhookSink(receiver.url, 2_000),
      log: backend.log,
      options: OPTIONS,
      health: relayHealth(),
    };
    receiver.down = true;
    const relayPass = async () => (await pass(deps)).claimed === OPTIONS.batchSize;
    const outageRelay = loop('outbox-relay', POLL_MS, backend.log, relayPass);
    await sleep(OUTAGE_MS);
    // The relay is paused for the recovery so that no pass is halfway through a failed delivery
    // while each event's backoff is read: what every event was waiting for when the receiver came back.
    await outageRelay.stop();
    const dueAtRecovery = await nextAttempts(tenantId);
    receiver.down = false;
    const recoveredAt = performance.now();
    const relay = loop('outbox-relay', POLL_MS, backend.log, relayPass);
    for (const deadline = Date.now() + 60_000; ((await statuses(tenantId))['pending'] ?? 0) > 0 && Date.now() < deadline;) await sleep(50);
    await relay.stop();
    const times = ids.filter((id) => receiver.taken.has(id)).map((id) => receiver.taken.get(id)! - recoveredAt);
    const sentAt = await sentTimes(tenantId);
    const broughtForward = ids.filter((id) => sentAt.get(id)! < dueAtRecovery.get(id)!).length;
    return {
      statuses: await statuses(tenantId),
      delivered: times.length,
      waiting: dueAtRecovery.size,
      broughtForward,
      first: Math.min(...times),
      last: Math.max(...times),
    };
  }

  /** Epoch milliseconds by event id, in the database's clock, which both columns are written in. */
  async function eventTimes(tenantId: string, column: 'next_attempt_at' | 'sent_at') {
    const { rows } = await backend.sql.query<{ id: string; at: number }>(
      `select id, (extract(epoch from ${column}) * 1000)::float8 as at from outbox_events where tenant_id = $1 and ${column} is not null`,
      [tenantId],
    );
    return new Map(rows.map((r) => [r.id, r.at]));
  }
  const nextAttempts = (tenantId: string) => eventTimes(tenantId, 'next_attempt_at');
  const sentTimes = (tenantId: string) => eventTimes(tenantId, 'sent_at');

  it('retries for OUTBOX_RETRY_FOR: every event is delivered, none dead, and the backlog drains as soon as the receiver takes it', async ({
    annotate,
  }) => {
    const run = await outage('outage-ours', relayOnce);
    expect(run.statuses).toEqual({ sent: EVENTS });
    expect(run.delivered).toBe(EVENTS);
    // The first delivery after the recovery comes within one backoff at most (OUTBOX_RETRY_MAX_MS);
    // from then on each delivered batch brings the next forward, instead of every event sitting
    // out a backoff of its own (up to OUTBOX_RETRY_MAX_MS each).
    expect(run.first).toBeLessThanOrEqual(OPTIONS.retryMaxDelayMs + 1_000);
    expect(run.last - run.first).toBeLessThan(OPTIONS.retryMaxDelayMs / 2);
    expect(run.broughtForward).toBeGreaterThan(0);
    await annotate(
      `outbox outage of ${OUTAGE_MS} ms, ${EVENTS} events: first delivery ${run.first.toFixed(0)} ms after the recovery, the last ${run.last.toFixed(0)} ms after it; ${run.broughtForward} of ${run.waiting} delivered before their backoff ran out`,
    );
  });

  it('the old relay, dead after 10 attempts and without bringing retries forward, loses events in the same outage', async ({
    annotate,
  }) => {
    const run = await outage('outage-counting', (deps) => countingRelayOnce(deps, 10));
    expect(run.statuses['dead'] ?? 0).toBeGreaterThan(0);
    await annotate(`the old relay in the same outage: ${run.statuses['dead']} of ${EVENTS} events dead`);
  });

  it('the old relay with no count limit still drains slowly: every retry sits out its own backoff', async ({ annotate }) => {
    const run = await outage('outage-slow', (deps) => countingRelayOnce(deps, 1_000_000));
    expect(run.statuses).toEqual({ sent: EVENTS });
    // How far apart the deliveries land depends on the jitter each backoff drew; what makes this
    // relay slow does not: no event was delivered before the backoff it was sitting out ran out.
    expect(run.waiting).toBe(EVENTS);
    expect(run.broughtForward).toBe(0);
    await annotate(
      `the old relay without a count limit: first delivery ${run.first.toFixed(0)} ms after the recovery, the last ${run.last.toFixed(0)} ms after it; ${run.broughtForward} of ${run.waiting} delivered before their backoff ran out`,
    );
  });

  it('dead events show in /metrics, and npm run outbox:requeue gives them back to the relay', async () => {
    const tenantId = 'outage-requeue';
    await createTenant(backend, tenantId);
    await backend.sql.query(
      `insert into outbox_events (tenant_id, topic, payload, status) select $1, 'coupon.issued', '{}', 'dead' from generate_series(1, 3)`,
      [tenantId],
    );
    const deadTotal = async () =>
      (await backend.sql.query<{ n: number }>("select count(*)::int as n from outbox_events where status = 'dead'")).rows[0]!.n;
    const metrics = await (await backend.app.fetch(new Request('http://test.local/metrics'))).text();
    expect(metrics).toMatch(new RegExp(`^outbox_dead_events ${await deadTotal()}$`, 'm'));

    const requeued = await runScript('src/entry/cli/outbox-requeue.ts', { DATABASE_URL: backend.databaseUrl }, ['--tenant', tenantId]);
    expect(requeued.output).toContain(`3 dead events given back to the relay (tenant ${tenantId})`);
    expect(requeued.code).toBe(0);
    expect(await statuses(tenantId)).toEqual({ pending: 3 });
    receiver.down = false;
    const deps: RelayDeps = {
      db: backend.database.db,
      transactions: backend.services.transactions,
      sink: webhookSink(receiver.url, 2_000),
      log: backend.log,
      options: OPTIONS,
      health: relayHealth(),
    };
    while ((await relayOnce(deps)).claimed > 0);
    expect(await statuses(tenantId)).toEqual({ sent: 3 });
  });
});
