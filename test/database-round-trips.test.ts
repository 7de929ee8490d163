import { setTimeout as sleep } from 'node:timers/promises';
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
  type TestBackend,
} from './support/harness.js';
import { startWireTap, type WireTap } from './support/pg-wire.js';

const TENANT = 'wire';
/** The application_name of the app's pool (test/support/harness.ts): the tap reads only its connections. */
const APP = 'test-app';

/** Resolves once some session of the app waits for a row lock. */
async function waitForLockWaiter(backend: TestBackend) {
  for (let tries = 0; tries < 200; tries++) {
    const waiting = await backend.sql.query("select 1 from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'", [
      APP,
    ]);
    if (waiting.rowCount) return;
    await sleep(25);
  }
  throw new Error('no session of the app ever waited for a lock');
}

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
    const opened = await startWireTap(await createDirectTestDatabaseUrl(), APP);
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

  it('ISSUED: four round trips with or without a key, the budget UPDATE last before COMMIT', async () => {
    // What rode in the budget statement is written: the outbox row, the audit row, the stored response.
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
    expect(await issue('open', 'ann')).toMatchObject({
      status: 'ISSUED',
      trips: ['begin', 'coupons.issue', 'coupons.budget.row', 'commit'],
    });
    expect(await issue('other', 'ann', 'k-ann-other')).toMatchObject({
      status: 'ISSUED',
      trips: ['begin', 'coupons.issue+key', 'coupons.budget.row+key', 'commit'],
    });
    expect(await written()).toEqual({ outbox: before.outbox + 2, audit: before.audit + 2, stored: 1 });
  });

  it('ALREADY_ISSUED: four, the audit row and the stored response in one statement after the issue', async () => {
    await issue('open', 'bob');
    expect(await issue('open', 'bob')).toMatchObject({
      status: 'ALREADY_ISSUED',
      trips: ['begin', 'coupons.issue', 'mutation.finish', 'commit'],
    });
    expect(await issue('open', 'bob', 'k-bob-again')).toMatchObject({
      status: 'ALREADY_ISSUED',
      trips: ['begin', 'coupons.issue+key', 'mutation.finish+key', 'commit'],
    });
  });

  it('MONTHLY_CAP and a sold-out campaign: three, and each rolls back', async () => {
    await issue('open', 'cid');
    await issue('other', 'cid');
    expect(await issue('third', 'cid')).toMatchObject({ status: 'MONTHLY_CAP', trips: ['begin', 'coupons.issue', 'rollback'] });
    expect(await issue('third', 'cid', 'k-cid-third')).toMatchObject({
      status: 'MONTHLY_CAP',
      trips: ['begin', 'coupons.issue+key', 'rollback'],
    });
    await issue('single', 'dan');
    expect(await issue('single', 'eve')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: ['begin', 'coupons.issue', 'rollback'] });
    expect(await issue('single', 'eve', 'k-eve')).toMatchObject({
      status: 'BUDGET_EXCEEDED',
      trips: ['begin', 'coupons.issue+key', 'rollback'],
    });
    // The member who holds the coupon still hears ALREADY_ISSUED from a sold-out campaign.
    expect((await issue('single', 'dan')).status).toBe('ALREADY_ISSUED');
  });

  it('BUDGET_EXCEEDED when the last room goes while the issue waits for the budget row: four', async () => {
    await campaign('last', 1_000);
    const takeTheLastRoom = "update campaign_budget_slots set issued_yen = budget_yen where tenant_id = $1 and campaign_id = 'last'";
    expect(await whileHeld(takeTheLastRoom, 'commit', () => issue('last', 'fin'))).toMatchObject({
      status: 'BUDGET_EXCEEDED',
      trips: ['begin', 'coupons.issue', 'coupons.budget.row', 'rollback'],
    });
  });

  it('a replay: four, and nothing is written', async () => {
    const first = await issue('third', 'fay', 'k-fay');
    const replay = await issue('third', 'fay', 'k-fay');
    expect(replay.status).toBe(first.status);
    expect(replay.trips).toEqual([
      'begin',
      'coupons.issue+key',
      expect.stringMatching(/^sql: select .* from "idempotency_keys"/),
      'rollback',
    ]);
  });

  it('budget slots: a free slot in one pass, and a sold-out campaign refused without a second pass', async () => {
    for (const member of ['s1', 's2', 's3', 's4']) {
      expect(await issue('sliced', member)).toMatchObject({
        status: 'ISSUED',
        trips: ['begin', 'coupons.issue', 'coupons.budget.skip', 'commit'],
      });
    }
    expect(await issue('sliced', 's5')).toMatchObject({ status: 'BUDGET_EXCEEDED', trips: ['begin', 'coupons.issue', 'rollback'] });
  });

  it('budget slots: waits for a slot (a second pass) only when every slot with room is held by others', async () => {
    await campaign('held', 2_000, 2);
    const holdEverySlot = "select 1 from campaign_budget_slots where tenant_id = $1 and campaign_id = 'held' for update";
    expect(await whileHeld(holdEverySlot, 'rollback', () => issue('held', 'gil'))).toMatchObject({
      status: 'ISSUED',
      trips: ['begin', 'coupons.issue', 'coupons.budget.skip', 'coupons.budget.wait', 'commit'],
    });
  });

  it('prepares each hot statement once per connection: a later issue sends no statement text at all', async () => {
    await issue('open', 'gus');
    const later = await issue('open', 'hal');
    expect(later.status).toBe('ISSUED');
    // begin and commit are simple queries (their text is the message); every other statement is bound by name.
    expect(later.parsed.map((t) => t.statement)).toEqual(['begin', 'commit']);
    const prepared = await sql<{ name: string }>`select name from pg_prepared_statements order by name`.execute(backend.database.db);
    expect(prepared.rows.map((r) => r.name)).toEqual(expect.arrayContaining(['coupons.issue', 'coupons.budget.row', 'mutation.finish']));
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

describe('DB_PREPARED_STATEMENTS=false (a pooler in transaction mode that cannot keep them)', () => {
  let backend: TestBackend;
  let tap: WireTap;
  let closeTap: () => Promise<void>;
  beforeAll(async () => {
    const opened = await startWireTap(await createDirectTestDatabaseUrl(), APP);
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

  it('prepares nothing: every statement goes unnamed with its text, in the same round trips', async () => {
    for (const member of ['a', 'b']) {
      tap.reset();
      const response = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'open' } }, asUser(TENANT, member));
      expect(response.body.data?.issueCoupon.status).toBe('ISSUED');
      expect(tap.trips).toHaveLength(4);
      expect(tap.trips.every((t) => t.parsed)).toBe(true);
      expect(tap.trips.slice(1, 3).map((t) => t.statement)).toEqual([
        expect.stringMatching(/^sql: with campaign as \(/),
        expect.stringMatching(/^sql: with taken as \(update campaign_budget_slots/),
      ]);
    }
    const prepared = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(backend.database.db);
    expect(prepared.rows[0]!.n).toBe(0);
  });
});
