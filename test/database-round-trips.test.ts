import { randomUUID } from 'node:crypto';
import { parse, print } from 'graphql';
import { DefaultQueryCompiler, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CreateCampaignDocument, IssueCouponDocument } from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  createDirectTestDatabaseUrl,
  createTenant,
  createTestBackend,
  gql,
  TEST_APP,
  type TestBackend,
} from './support/harness.js';
import { startWireTap, type WireTap } from './support/pg-wire.js';
import { waitForLockWaiter } from './support/wait.js';
import { requestFingerprint } from '../src/http/plugins/idempotency-key.js';

const TENANT = 'wire';
/**
 * The issue's one statement on the wire: built for any campaign (`coupons.issue.one`, a process's
 * first issue on it), or for the campaign's shape once the process knows it (`.row`, `.slots`,
 * `.leases`); `+key` with an Idempotency-Key.
 */
const ISSUE = expect.stringMatching(/^coupons\.issue\.one(\.row|\.slots|\.leases)?$/);
const ISSUE_KEYED = expect.stringMatching(/^coupons\.issue\.one(\.row|\.slots|\.leases)?\+key$/);
/**
 * What issueCoupon costs on the wire, read from the PostgreSQL protocol the app sends (one pool
 * connection, so the round trips are the request's, in order). The table of round trips in docs/design.md §5
 * per outcome is this test's expectations.
 */
describe('issueCoupon on the wire', () => {
  let backend: TestBackend;
  let tap: WireTap;
  let closeTap: () => Promise<void>;

  const issue = async (campaignId: string, member: string, key?: string) => {
    tap.reset();
    const response = await gql(
      backend.app.fetch,
      IssueCouponDocument,
      { input: { campaignId } },
      {
        ...asUser(TENANT, member),
        ...(key ? { 'idempotency-key': key } : {}),
      },
    );
    expect(response.body.errors).toBeUndefined();
    return {
      status: response.body.data!.issueCoupon.status,
      trips: tap.trips.map((t) => t.statement),
      parsed: tap.trips.filter((t) => t.parsed),
    };
  };
  /** Sends `send` while another transaction holds the rows `lockSql` locks; ends that transaction once the app waits for them. */
  const whileHeld = async <T>(lockSql: string, end: 'commit' | 'rollback', send: () => Promise<T>): Promise<T> => {
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      await holder.query(lockSql, [TENANT]);
      const pending = send();
      await waitForLockWaiter(backend);
      await holder.query(end);
      return await pending;
    } finally {
      holder.release();
    }
  };
  const campaign = (id: string, budgetYen: number, budgetSlots = 1) =>
    gql(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id, name: id, discountYen: 1_000, budgetYen, budgetSlots } },
      asTenantAdmin(TENANT),
    );

  beforeAll(async () => {
    const opened = await startWireTap(await createDirectTestDatabaseUrl(), TEST_APP);
    tap = opened.tap;
    closeTap = opened.close;
    backend = await createTestBackend({ databaseUrl: opened.url, env: { DB_POOL_MAX: '1', DB_PREPARED_STATEMENTS: 'true' } });
    await createTenant(backend, TENANT, 2_000);
    await campaign('open', 100_000);
    await campaign('other', 100_000);
    await campaign('third', 100_000);
    await campaign('single', 1_000);
    await campaign('sliced', 4_000, 4);
  });
  afterAll(async () => {
    await backend.close();
    await closeTap();
  });

  it('ISSUED: one round trip with or without a key, the whole issue one statement in its own implicit transaction', async () => {
    // What rode in the statement is written: the outbox row, the audit row, the stored response.
    const written = async () =>
      (
        await backend.sql.query<{ outbox: number; audit: number; stored: number }>(
          `select (select count(*)::int from outbox_events where tenant_id = $1) as outbox,
                  (select count(*)::int from audit_log where tenant_id = $1 and operation = 'issueCoupon') as audit,
                  (select count(*)::int from idempotency_keys where key = 'k-ann-other' and response->>'status' = 'ISSUED') as stored`,
          [TENANT],
        )
      ).rows[0]!;
    const before = await written();
    expect(await issue('open', 'ann')).toMatchObject({ status: 'ISSUED', trips: [ISSUE] });
    expect(await issue('other', 'ann', 'k-ann-other')).toMatchObject({ status: 'ISSUED', trips: [ISSUE_KEYED] });
    expect(await written()).toEqual({ outbox: before.outbox + 2, audit: before.audit + 2, stored: 1 });
  });

  it('ALREADY_ISSUED: one, the audit row and the stored response in the same statement', async () => {
    await issue('open', 'bob');
    expect(await issue('open', 'bob')).toMatchObject({ status: 'ALREADY_ISSUED', trips: [ISSUE] });
    expect(await issue('open', 'bob', 'k-bob-again')).toMatchObject({ status: 'ALREADY_ISSUED', trips: [ISSUE_KEYED] });
    const stored = await backend.sql.query("select response from idempotency_keys where key = 'k-bob-again'");
    expect(stored.rows[0].response).toMatchObject({ status: 'ALREADY_ISSUED', coupon: { memberId: 'bob', campaignId: 'open' } });
  });

  it('MONTHLY_CAP and a sold-out campaign: one each, and nothing is kept (with a key, its claim commits expired)', async () => {
    await issue('open', 'cid');
    await issue('other', 'cid');
    const keys = async () =>
      (
        await backend.sql.query(
          `select count(*) filter (where expires_at > now())::int as live,
                  count(*) filter (where expires_at = '-infinity' and response is null)::int as expired
             from idempotency_keys where key like 'k-cid%' or key = 'k-eve'`,
        )
      ).rows[0];
    expect(await issue('third', 'cid')).toMatchObject({ status: 'MONTHLY_CAP', trips: [ISSUE] });
    expect(await issue('third', 'cid', 'k-cid-third')).toMatchObject({ status: 'MONTHLY_CAP', trips: [ISSUE_KEYED] });
    await issue('single', 'dan');
    expect(await issue('single', 'eve')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: [ISSUE] });
    expect(await issue('single', 'eve', 'k-eve')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: [ISSUE_KEYED] });
    // Not raised: a raise would have rolled the claims back, and PostgreSQL would log each as an ERROR.
    expect(await keys()).toEqual({ live: 0, expired: 2 });
    // The refused key runs afresh once the campaign has room again, in one round trip.
    await backend.sql.query(
      "update campaign_budget_slots set budget_yen = budget_yen + 1000 where tenant_id = $1 and campaign_id = 'single'",
      [TENANT],
    );
    expect(await issue('single', 'eve', 'k-eve')).toMatchObject({ status: 'ISSUED', trips: [ISSUE_KEYED] });
    // The member who holds the coupon still hears ALREADY_ISSUED from a sold-out campaign.
    expect((await issue('single', 'dan')).status).toBe('ALREADY_ISSUED');
  });

  it('a refusal whose key another request holds waits for it, then replays its answer: two, and nothing is written', async () => {
    // At the month's cap, this issue is MONTHLY_CAP on its own.
    await issue('open', 'ida');
    await issue('other', 'ida');
    const variables = { input: { campaignId: 'third' } };
    const fingerprint = requestFingerprint(parse(print(IssueCouponDocument)), undefined, variables);
    const stored = {
      status: 'ISSUED',
      coupon: {
        id: randomUUID(),
        campaignId: 'third',
        memberId: 'ida',
        month: '2026-12',
        amountYen: 1_000,
        issuedAt: '2026-12-01T00:00:00.000Z',
      },
    };
    const holdTheKey = `insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at, response)
      values ($1, 'ida', 'user', 'k-ida-held', '${fingerprint}', 'issueCoupon', now() + interval '1 hour', '${JSON.stringify(stored)}')`;
    expect(await whileHeld(holdTheKey, 'commit', () => issue('third', 'ida', 'k-ida-held'))).toMatchObject({
      status: 'ISSUED',
      trips: [ISSUE_KEYED, expect.stringMatching(/^sql: select .* from "idempotency_keys"/)],
    });
  });

  it('a key whose holder was refused and committed its claim expired: the waiting request takes it and issues, in one', async () => {
    const refusedClaim = `insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at)
      values ($1, 'jay', 'user', 'k-jay-refused', 'another request', 'issueCoupon', '-infinity')`;
    expect(await whileHeld(refusedClaim, 'commit', () => issue('open', 'jay', 'k-jay-refused'))).toMatchObject({
      status: 'ISSUED',
      trips: [ISSUE_KEYED],
    });
    const stored = await backend.sql.query(
      "select response->>'status' as status, expires_at > now() as live from idempotency_keys where key = 'k-jay-refused'",
    );
    expect(stored.rows).toEqual([{ status: 'ISSUED', live: true }]);
  });

  it('BUDGET_EXCEEDED when the last room goes while the issue waits for the budget row: one, the statement raises and rolls back', async () => {
    await campaign('last', 1_000);
    const takeTheLastRoom = "update campaign_budget_slots set issued_yen = budget_yen where tenant_id = $1 and campaign_id = 'last'";
    expect(await whileHeld(takeTheLastRoom, 'commit', () => issue('last', 'fin', 'k-fin'))).toMatchObject({
      status: 'BUDGET_EXCEEDED',
      trips: [ISSUE_KEYED],
    });
    const left = await backend.sql.query(
      `select (select count(*)::int from coupons where tenant_id = $1 and member_id = 'fin') as coupons,
              (select count(*)::int from member_monthly_usage where tenant_id = $1 and member_id = 'fin') as usage,
              (select count(*)::int from idempotency_keys where key = 'k-fin') as keys`,
      [TENANT],
    );
    expect(left.rows[0]).toEqual({ coupons: 0, usage: 0, keys: 0 });
  });

  it('a double tap committed while the issue waited for its coupon: the statement rolls back and runs again, two', async () => {
    await campaign('tap', 10_000);
    // Another issue of the same member holds the coupon's index entry; it commits while this one waits for it.
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      await holder.query(
        "insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at) values ($1, 'tap', 'gia', '2026-01', 1000, now())",
        [TENANT],
      );
      await holder.query("insert into member_monthly_usage (tenant_id, member_id, month, used_yen) values ($1, 'gia', '2026-01', 1000)", [
        TENANT,
      ]);
      await holder.query("update campaign_budget_slots set issued_yen = issued_yen + 1000 where tenant_id = $1 and campaign_id = 'tap'", [
        TENANT,
      ]);
      const pending = issue('tap', 'gia');
      await waitForLockWaiter(backend);
      await holder.query('commit');
      // The statement again, on a newer snapshot: it reads the coupon itself.
      expect(await pending).toMatchObject({ status: 'ALREADY_ISSUED', trips: [ISSUE, ISSUE] });
    } finally {
      holder.release();
    }
  });

  it('a replay: two, and nothing is written', async () => {
    const first = await issue('third', 'fay', 'k-fay');
    const replay = await issue('third', 'fay', 'k-fay');
    expect(replay.status).toBe(first.status);
    expect(replay.trips).toEqual([ISSUE_KEYED, expect.stringMatching(/^sql: select .* from "idempotency_keys"/)]);
  });

  it('budget slots: a free slot in the same one statement, and a sold-out campaign refused in it', async () => {
    for (const member of ['s1', 's2', 's3', 's4']) {
      expect(await issue('sliced', member)).toMatchObject({ status: 'ISSUED', trips: [ISSUE] });
    }
    expect(await issue('sliced', 's5')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: [ISSUE] });
    const slots = await backend.sql.query("select issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'sliced'", [
      TENANT,
    ]);
    expect(slots.rows.map((r) => r.issued_yen)).toEqual([1_000, 1_000, 1_000, 1_000]);
  });

  it('budget slots: waits for a slot only when every slot with room is held by others, still in one statement', async () => {
    await campaign('held', 2_000, 2);
    const holdEverySlot = "select 1 from campaign_budget_slots where tenant_id = $1 and campaign_id = 'held' for update";
    expect(await whileHeld(holdEverySlot, 'rollback', () => issue('held', 'gil'))).toMatchObject({
      status: 'ISSUED',
      trips: [ISSUE],
    });
  });

  it('budget slots: the slot it waited for went full while another has room: the statement raises, rolls back and runs again, two', async () => {
    await campaign('refilled', 2_000, 2);
    // Both slots held; slot 0's holder takes its last coupon, and the slot the issue waits for may be either.
    const fillSlotZero =
      "update campaign_budget_slots set issued_yen = budget_yen where tenant_id = $1 and campaign_id = 'refilled' and slot = 0";
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      await holder.query("select 1 from campaign_budget_slots where tenant_id = $1 and campaign_id = 'refilled' for update", [TENANT]);
      await holder.query(fillSlotZero, [TENANT]);
      const pending = issue('refilled', 'hil');
      await waitForLockWaiter(backend);
      await holder.query('commit');
      const answer = await pending;
      expect(answer.status).toBe('ISSUED');
      // One statement when it waited for slot 1; two when it waited for slot 0, which had gone full.
      expect(answer.trips).toEqual(answer.trips.length === 1 ? [ISSUE] : [ISSUE, ISSUE]);
    } finally {
      holder.release();
    }
    const slots = await backend.sql.query(
      "select issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'refilled' order by slot",
      [TENANT],
    );
    expect(slots.rows.map((r) => r.issued_yen)).toEqual([1_000, 1_000]);
  });

  it('budget leases: the lease it waited for went full: the statement raises rather than commit a coupon without budget, then refuses, two', async () => {
    await gql(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'leased', name: 'leased', discountYen: 1_000, budgetYen: 2_000, budgetLeaseCoupons: 2 } },
      asTenantAdmin(TENANT),
    );
    // The whole budget is in a lease of another process, which a session holds and spends.
    await backend.sql.query(
      `with lease as (
         insert into campaign_budget_leases (tenant_id, campaign_id, holder, budget_yen, issued_yen, expires_at)
         values ($1, 'leased', 'elsewhere', 2000, 1000, now() + interval '1 hour')
       )
       update campaign_budget_slots set leased_yen = 2000 where tenant_id = $1 and campaign_id = 'leased'`,
      [TENANT],
    );
    const spendTheLease = "update campaign_budget_leases set issued_yen = budget_yen where tenant_id = $1 and campaign_id = 'leased'";
    expect(await whileHeld(spendTheLease, 'commit', () => issue('leased', 'ike'))).toMatchObject({
      status: 'BUDGET_EXCEEDED',
      trips: [ISSUE, ISSUE],
    });
    const left = await backend.sql.query(
      `select (select count(*)::int from coupons where tenant_id = $1 and campaign_id = 'leased') as coupons,
              (select count(*)::int from member_monthly_usage where tenant_id = $1 and member_id = 'ike') as usage`,
      [TENANT],
    );
    expect(left.rows[0]).toEqual({ coupons: 0, usage: 0 });
  });

  it('prepares each hot statement once per connection: a later issue sends no statement text at all', async () => {
    // The statements warmed here: the pool may have replaced its one connection since the earlier tests, and a
    // campaign's first issue in the process runs the statement for any shape, the next the one for its shape.
    for (const member of ['gus', 'guy']) {
      await issue('open', member);
      await issue('other', member, `k-${member}`);
    }
    const later = await issue('open', 'hal');
    const laterKeyed = await issue('other', 'hal', 'k-hal');
    expect([later.status, laterKeyed.status]).toEqual(['ISSUED', 'ISSUED']);
    expect([later.parsed, laterKeyed.parsed]).toEqual([[], []]);
    const prepared = await sql<{ name: string }>`select name from pg_prepared_statements order by name`.execute(backend.database.db);
    expect(prepared.rows.map((r) => r.name)).toEqual(expect.arrayContaining([ISSUE, ISSUE_KEYED]));
  });

  it('compiles no query while it serves an issue: Kysely built them once, at start-up', async () => {
    const compile = vi.spyOn(DefaultQueryCompiler.prototype, 'compileQuery');
    try {
      expect((await issue('open', 'ivy')).status).toBe('ISSUED');
      expect((await issue('open', 'ivy', 'k-ivy')).status).toBe('ALREADY_ISSUED');
      expect(compile).not.toHaveBeenCalled();
    } finally {
      compile.mockRestore();
    }
  });
});

/**
 * The issue as a transaction: what runs when the one statement cannot (its sessions lack the role's
 * timeouts, or less of the deadline is left than they allow), and what each outcome costs there.
 */
describe('issueCoupon as a transaction, on the wire', () => {
  let backend: TestBackend;
  let tap: WireTap;
  let closeTap: () => Promise<void>;
  const issue = async (campaignId: string, member: string, key?: string) => {
    tap.reset();
    const response = await gql(
      backend.app.fetch,
      IssueCouponDocument,
      { input: { campaignId } },
      { ...asUser(TENANT, member), ...(key ? { 'idempotency-key': key } : {}) },
    );
    expect(response.body.errors).toBeUndefined();
    return { status: response.body.data!.issueCoupon.status, trips: tap.trips.map((t) => t.statement) };
  };

  beforeAll(async () => {
    const opened = await startWireTap(await createDirectTestDatabaseUrl(), TEST_APP);
    tap = opened.tap;
    closeTap = opened.close;
    // A deadline shorter than the statement timeout: the one statement could outlive it, so the transaction runs, its timeouts capped.
    backend = await createTestBackend({
      databaseUrl: opened.url,
      env: { DB_POOL_MAX: '1', DB_PREPARED_STATEMENTS: 'true', REQUEST_DEADLINE_MS: '4000', STATEMENT_TIMEOUT_MS: '5000' },
    });
    await createTenant(backend, TENANT, 2_000);
    for (const [id, budgetYen] of [
      ['open', 100_000],
      ['other', 100_000],
      ['third', 100_000],
      ['single', 1_000],
    ] as const) {
      await gql(
        backend.app.fetch,
        CreateCampaignDocument,
        { input: { id, name: id, discountYen: 1_000, budgetYen, budgetSlots: 1 } },
        asTenantAdmin(TENANT),
      );
    }
  });
  afterAll(async () => {
    await backend.close();
    await closeTap();
  });

  it('three for every outcome: the same one statement between BEGIN and COMMIT (or ROLLBACK), the budget row last', async () => {
    expect(await issue('open', 'ann')).toMatchObject({ status: 'ISSUED', trips: ['begin', ISSUE, 'commit'] });
    expect(await issue('other', 'ann', 'k-ann')).toMatchObject({ status: 'ISSUED', trips: ['begin', ISSUE_KEYED, 'commit'] });
    expect(await issue('open', 'ann')).toMatchObject({ status: 'ALREADY_ISSUED', trips: ['begin', ISSUE, 'commit'] });
    expect(await issue('third', 'ann')).toMatchObject({ status: 'MONTHLY_CAP', trips: ['begin', ISSUE, 'rollback'] });
    await issue('single', 'bob');
    expect(await issue('single', 'cid')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: ['begin', ISSUE, 'rollback'] });
  });

  it('sessions without the timeouts: the statement writes nothing and says so, then the transaction issues', async () => {
    // A pooler's server connection opened before the role's defaults were set looks like this session.
    const longer = await createTestBackend({ databaseUrl: backend.databaseUrl, env: { DB_POOL_MAX: '1' } });
    try {
      await sql`select 1`.execute(longer.database.db);
      await sql`set lock_timeout = 0`.execute(longer.database.db);
      // A backend of its own knows no tenant yet (tenant knowledge belongs to its services): its first read looks the tenant up.
      await gql(longer.app.fetch, '{ tenant { id } }', {}, asUser(TENANT, 'dee'));
      tap.reset();
      const response = await gql(longer.app.fetch, IssueCouponDocument, { input: { campaignId: 'open' } }, asUser(TENANT, 'dee'));
      expect(response.body.data?.issueCoupon.status).toBe('ISSUED');
      expect(tap.trips.map((t) => t.statement)).toEqual([ISSUE, 'begin', ISSUE, 'commit']);
      const coupons = await backend.sql.query("select count(*)::int as n from coupons where tenant_id = $1 and member_id = 'dee'", [
        TENANT,
      ]);
      expect(coupons.rows[0].n).toBe(1);
    } finally {
      await longer.close();
    }
  });
});

describe('DB_PREPARED_STATEMENTS=false (a pooler in transaction mode that cannot keep them)', () => {
  let backend: TestBackend;
  let tap: WireTap;
  let closeTap: () => Promise<void>;
  beforeAll(async () => {
    const opened = await startWireTap(await createDirectTestDatabaseUrl(), TEST_APP);
    tap = opened.tap;
    closeTap = opened.close;
    backend = await createTestBackend({ databaseUrl: opened.url, env: { DB_POOL_MAX: '1', DB_PREPARED_STATEMENTS: 'false' } });
    await createTenant(backend, TENANT);
    await gql(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'open', name: 'open', discountYen: 100, budgetYen: 10_000 } },
      asTenantAdmin(TENANT),
    );
  });
  afterAll(async () => {
    await backend.close();
    await closeTap();
  });

  it('prepares nothing: every statement goes unnamed with its text, in the same round trip', async () => {
    for (const member of ['a', 'b']) {
      tap.reset();
      const response = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'open' } }, asUser(TENANT, member));
      expect(response.body.data?.issueCoupon.status).toBe('ISSUED');
      expect(tap.trips).toHaveLength(1);
      expect(tap.trips.every((t) => t.parsed)).toBe(true);
      expect(tap.trips[0]!.statement).toMatch(/^sql: with guard as \(/);
    }
    const prepared = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(backend.database.db);
    expect(prepared.rows[0]!.n).toBe(0);
  });
});
