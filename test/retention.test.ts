import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { retentionPass, startWorkers } from '../src/entry/worker/index.js';
import { HeartbeatHuddleDocument, JoinHuddleDocument } from './generated/graphql.js';
import { asUser, createTenant, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';

const TENANT = 'kept';

describe('retention', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: { OUTBOX_RETENTION_HOURS: '1', HUDDLE_RETENTION_HOURS: '1', RETENTION_BATCH_SIZE: '2', RETENTION_INTERVAL_MS: '20' },
    });
    await createTenant(backend, TENANT);
  });
  afterAll(() => backend.close());
  beforeEach(async () => {
    await backend.sql.query('delete from outbox_events');
    await backend.sql.query('delete from huddle_participants');
    await backend.sql.query('delete from huddle_sessions');
    await backend.sql.query('delete from provider_events');
  });

  /** Outbox events of every kind, and huddle sessions ended long ago, lately, and not at all (2 members each). */
  async function plant() {
    await backend.sql.query(
      `insert into outbox_events (tenant_id, topic, payload, status, sent_at, created_at)
       select $1, kind, jsonb_build_object('n', g), status, sent, now() - interval '1 day'
         from (values ('old-sent', 'sent', now() - interval '2 hours'), ('new-sent', 'sent', now() - interval '10 minutes'),
                      ('old-pending', 'pending', null::timestamptz), ('old-dead', 'dead', null::timestamptz)) k(kind, status, sent),
              generate_series(1, 5) g`,
      [TENANT],
    );
    await backend.sql.query(
      `with s as (
         insert into huddle_sessions (tenant_id, objective_id, started_at, ended_at)
         select $1, kind || '-' || g, now() - interval '1 day', ended from (values ('old', now() - interval '2 hours'),
                ('new', now() - interval '10 minutes'), ('active', null::timestamptz)) k(kind, ended), generate_series(1, 3) g
         returning tenant_id, id)
       insert into huddle_participants (tenant_id, session_id, member_id, left_at)
       select s.tenant_id, s.id, 'member-' || m, now() - interval '3 hours' from s, generate_series(1, 2) m`,
      [TENANT],
    );
    // Stripe's events: handled long ago, handled lately, and one never handled (kept for its next delivery).
    await backend.sql.query(
      `insert into provider_events (event_id, type, received_at, handled_at)
       select 'evt_' || kind || g, 'payment_intent.succeeded', at, case when kind = 'unhandled' then null else at end
         from (values ('old', now() - interval '40 days'), ('new', now() - interval '1 day'), ('unhandled', now() - interval '40 days')) k(kind, at),
              generate_series(1, 3) g`,
    );
  }

  const counts = async () => ({
    outbox: Object.fromEntries(
      (await backend.sql.query<{ topic: string; n: number }>('select topic, count(*)::int as n from outbox_events group by 1')).rows.map(
        (r) => [r.topic, r.n],
      ),
    ),
    sessions: Object.fromEntries(
      (
        await backend.sql.query<{ kind: string; n: number }>(
          "select split_part(objective_id, '-', 1) as kind, count(*)::int as n from huddle_sessions group by 1",
        )
      ).rows.map((r) => [r.kind, r.n]),
    ),
    participants: (await backend.sql.query<{ n: number }>('select count(*)::int as n from huddle_participants')).rows[0]!.n,
    providerEvents: Object.fromEntries(
      (
        await backend.sql.query<{ kind: string; n: number }>(
          "select regexp_replace(event_id, '^evt_|[0-9]+$', '', 'g') as kind, count(*)::int as n from provider_events group by 1",
        )
      ).rows.map((r) => [r.kind, r.n]),
    ),
  });

  it('deletes sent events, ended sessions (with their participants) and handled Stripe events past their age, a small batch per statement, and nothing else', async () => {
    await plant();
    let passes = 0;
    while (await retentionPass(backend.services)) passes++;
    // 5 old sent events and 3 old sessions, 2 rows per statement: three full batches of events.
    expect(passes).toBe(2);
    expect(await counts()).toEqual({
      outbox: { 'new-sent': 5, 'old-pending': 5, 'old-dead': 5 },
      sessions: { new: 3, active: 3 },
      participants: 12,
      providerEvents: { new: 3, unhandled: 3 },
    });
  });

  it('passes over a row another transaction holds instead of waiting for it', async () => {
    await plant();
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      const held = await holder.query<{ id: string }>("select id from outbox_events where topic = 'old-sent' limit 1 for update");
      // A wait would end in the transactions' lock_timeout and fail the pass.
      while (await retentionPass(backend.services));
      await holder.query('commit');
      const { rows } = await backend.sql.query<{ id: string }>("select id from outbox_events where topic = 'old-sent'");
      expect(rows).toEqual(held.rows);
    } finally {
      holder.release();
    }
  });

  it('runs as a background loop of the worker', async () => {
    await plant();
    const workers = startWorkers(backend.services);
    try {
      for (const deadline = Date.now() + 20_000; (await counts()).participants > 12 && Date.now() < deadline;) await sleep(50);
      for (const deadline = Date.now() + 20_000; (await counts()).outbox['old-sent'] && Date.now() < deadline;) await sleep(50);
    } finally {
      await workers.stop();
    }
    expect(await counts()).toMatchObject({ sessions: { new: 3, active: 3 }, participants: 12 });
    expect((await counts()).outbox['old-sent']).toBeUndefined();
  });
});

describe('heartbeats', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT);
  });
  afterAll(() => backend.close());

  /**
   * Updates of huddle_participants and how many were HOT. A backend sends its statistics when it
   * goes idle, but at most once a second and otherwise only after 10 s idle (PostgreSQL's
   * PGSTAT_IDLE_INTERVAL), and always when it exits: the heartbeats run on a backend of their own
   * whose connections are closed before this reads.
   */
  async function updates(atLeast: number): Promise<{ updates: number; hot: number }> {
    for (const deadline = Date.now() + 30_000; ; await sleep(50)) {
      const { rows } = await backend.sql.query<{ updates: number; hot: number }>(
        "select n_tup_upd::int as updates, n_tup_hot_upd::int as hot from pg_stat_user_tables where relname = 'huddle_participants'",
      );
      if (rows[0]!.updates >= atLeast || Date.now() > deadline) return rows[0]!;
    }
  }

  async function heartbeats(objectiveId: string, members: number, rounds: number) {
    const sender = await createTestBackend({ databaseUrl: backend.databaseUrl });
    try {
      for (let m = 0; m < members; m++) {
        await gqlOk(sender.app.fetch, JoinHuddleDocument, { input: { objectiveId } }, asUser(TENANT, `member-${m}`));
      }
      for (let r = 0; r < rounds; r++) {
        await Promise.all(
          Array.from({ length: members }, (_, m) =>
            gqlOk(sender.app.fetch, HeartbeatHuddleDocument, { input: { objectiveId } }, asUser(TENANT, `member-${m}`)),
          ),
        );
      }
    } finally {
      await sender.close();
    }
  }

  it('are HOT updates: no index covers what a heartbeat changes', async () => {
    const before = await updates(0);
    await heartbeats('hot', 20, 10);
    const after = await updates(before.updates + 200);
    const hot = after.hot - before.hot;
    const all = after.updates - before.updates;
    expect(all).toBeGreaterThanOrEqual(200);
    // An index over a column a heartbeat changes makes every update non-HOT (a ratio of 0). Without
    // one, an update is non-HOT only when it finds its page full before pruning has freed it, which
    // a busy machine's overlapping rounds make happen for a round or two of the ten.
    expect(hot / all).toBeGreaterThan(0.5);
  });

  it('were none while an index covered last_heartbeat_at (the index the migrations dropped)', async () => {
    await backend.sql.query('create index huddle_participants_present on huddle_participants (last_heartbeat_at) where left_at is null');
    try {
      const before = await updates(0);
      await heartbeats('indexed', 20, 10);
      const after = await updates(before.updates + 200);
      expect(after.hot - before.hot).toBe(0);
    } finally {
      await backend.sql.query('drop index huddle_participants_present');
    }
  });
});
