import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { adoptLegacyData, type AdoptionReport } from '../src/features/adoption/adopt.js';
import type { Database } from '../src/db/database.js';
import { migrate } from '../src/db/migrate.js';
import { CreateContractDocumentDocument, IssueCouponDocument, LedgerCheckDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createEmptyDatabaseUrl, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { describeRun, REFERENCE_SCENARIO_TIMEOUT_MS, runReferenceScenario } from './support/coupon-run.js';
import { runScript } from './support/scripts.js';
import { openToolDatabase } from './support/tool-database.js';

const FIXTURE = new URL('./fixtures/legacy-damaged.sql', import.meta.url);
const TENANT = 'shop';

/** Every table of both schemas with a digest of its rows: equal snapshots mean nothing changed. */
async function snapshot(client: pg.Pool): Promise<Record<string, string>> {
  const { rows: tables } = await client.query<{ name: string }>(
    `select table_schema || '.' || table_name as name from information_schema.tables
      where table_schema in ('public', 'legacy') and table_type = 'BASE TABLE' order by 1`,
  );
  const digest: Record<string, string> = {};
  for (const { name } of tables) {
    const { rows } = await client.query<{ md5: string | null }>(
      `select md5(string_agg(t::text, '|' order by t::text)) as md5 from ${name} t`,
    );
    digest[name] = rows[0]!.md5 ?? 'empty';
  }
  const constraints = await client.query<{ c: string }>(
    "select string_agg(conname || ':' || convalidated, ',' order by conname) as c from pg_constraint where connamespace = 'public'::regnamespace",
  );
  digest['constraints'] = constraints.rows[0]!.c ?? '';
  return digest;
}

async function legacyDatabase(extraSql = ''): Promise<{ url: string; sql: pg.Pool; database: Database }> {
  const url = await createEmptyDatabaseUrl();
  const sql = new pg.Pool({ connectionString: url, max: 2 });
  await sql.query(await readFile(FIXTURE, 'utf8'));
  if (extraSql) await sql.query(extraSql);
  const database = openToolDatabase(url, 'adopt-test', { max: 4 });
  return { url, sql, database };
}

type Legacy = Awaited<ReturnType<typeof legacyDatabase>>;

/** A damaged legacy database of its own, adopted: every test that needs one makes one. */
async function adoptedDatabase(): Promise<Legacy & { report: AdoptionReport }> {
  const legacy = await legacyDatabase();
  return { ...legacy, report: await adoptLegacyData(legacy.database.db, { tenantId: TENANT, dryRun: false }) };
}

describe('adopting a database the naive versions damaged', () => {
  const opened: Legacy[] = [];
  const backends: TestBackend[] = [];
  const track = <T extends Legacy>(legacy: T) => (opened.push(legacy), legacy);
  const backendOn = async (legacy: Legacy) => {
    const backend = await createTestBackend({ databaseUrl: legacy.url });
    backends.push(backend);
    return backend;
  };
  afterAll(async () => {
    for (const backend of backends) await backend.close();
    for (const legacy of opened) {
      await legacy.database.close();
      await legacy.sql.end();
    }
  });

  it('--dry-run reports what it would do and changes nothing', async () => {
    const legacy = track(await legacyDatabase());
    const before = await snapshot(legacy.sql);
    const dry = await adoptLegacyData(legacy.database.db, { tenantId: TENANT, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, movedTables: ['campaigns', 'issued_coupons', 'contract_documents'] });
    expect(dry.rows).toEqual({ tenants: 3, contracts: 4, documents: 8, campaigns: 3, coupons: 10, usageRows: 5 });
    expect(await snapshot(legacy.sql)).toEqual(before);
  });

  it('adopts every row, marks the damage and reports it', async () => {
    const legacy = track(await adoptedDatabase());
    const { report } = legacy;
    expect(report.rows).toEqual({ tenants: 3, contracts: 4, documents: 8, campaigns: 3, coupons: 10, usageRows: 5 });
    expect(report.duplicateCoupons).toEqual({ groups: 3, voided: 2, keptRedeemed: 1 });
    expect(report.overspend).toEqual([{ campaignId: 'spring', budgetYen: 3_000, issuedYen: 6_000, overspendYen: 3_000 }]);
    expect(report.membersOverCap).toEqual([{ memberId: 'frank', month: '2026-10', couponsYen: 2_500, capYen: 2_000 }]);
    expect(report.sequences).toEqual([
      { tenantId: 'legacy-a', lastDocNumber: 10_000_004 },
      { tenantId: 'legacy-b', lastDocNumber: 10_000_001 },
    ]);
    expect(report.duplicateDocumentNumbers).toEqual([{ tenantId: 'legacy-a', docNumber: 10_000_002, documents: 2 }]);

    const coupons = await legacy.sql.query<{ id: string; legacy_duplicate: boolean; voided: boolean; redeemed: boolean }>(
      `select id, legacy_duplicate, voided_at is not null as voided, redeemed_at is not null as redeemed
         from coupons where tenant_id = $1 and member_id in ('alice', 'bob', 'carol') order by id`,
      [TENANT],
    );
    expect(coupons.rows).toEqual([
      { id: 'a0000000-0000-4000-8000-000000000001', legacy_duplicate: true, voided: true, redeemed: false },
      { id: 'a0000000-0000-4000-8000-000000000002', legacy_duplicate: false, voided: false, redeemed: true },
      { id: 'b0000000-0000-4000-8000-000000000001', legacy_duplicate: false, voided: false, redeemed: false },
      { id: 'b0000000-0000-4000-8000-000000000002', legacy_duplicate: true, voided: true, redeemed: false },
      { id: 'c0000000-0000-4000-8000-000000000001', legacy_duplicate: false, voided: false, redeemed: true },
      { id: 'c0000000-0000-4000-8000-000000000002', legacy_duplicate: true, voided: false, redeemed: true },
    ]);
    const counts = await legacy.sql.query<{ coupons: number; documents: number; legacy_coupons: number; legacy_documents: number }>(
      `select (select count(*)::int from coupons) as coupons, (select count(*)::int from contract_documents) as documents,
              (select count(*)::int from legacy.issued_coupons) as legacy_coupons, (select count(*)::int from legacy.contract_documents) as legacy_documents`,
    );
    expect(counts.rows[0]).toEqual({ coupons: 10, documents: 8, legacy_coupons: 10, legacy_documents: 8 });
    const slots = await legacy.sql.query('select campaign_id, issued_yen from campaign_budget_slots where tenant_id = $1 order by 1', [
      TENANT,
    ]);
    expect(slots.rows).toEqual([
      { campaign_id: 'autumn', issued_yen: 1_000 },
      { campaign_id: 'spring', issued_yen: 6_000 },
      { campaign_id: 'summer', issued_yen: 500 },
    ]);
    // An adopted campaign started with its first coupon: no adopted coupon was issued before its startsAt.
    const started = await legacy.sql.query(
      `select c.id from campaigns c where c.tenant_id = $1
          and c.starts_at <> (select min(k.issued_at) from coupons k where k.tenant_id = c.tenant_id and k.campaign_id = c.id)`,
      [TENANT],
    );
    expect(started.rows).toEqual([]);
  });

  it('a second run changes nothing', async () => {
    const legacy = track(await adoptedDatabase());
    const before = await snapshot(legacy.sql);
    const again = await adoptLegacyData(legacy.database.db, { tenantId: TENANT, dryRun: false });
    expect(again).toMatchObject({ alreadyAdopted: true, movedTables: [], migrationsApplied: [] });
    expect(await snapshot(legacy.sql)).toEqual(before);
  });

  it('keeps every rule on new writes: ALREADY_ISSUED for a legacy duplicate, an overspent campaign refuses, numbers continue', async () => {
    const backend = await backendOn(track(await adoptedDatabase()));
    const issue = async (member: string, campaignId: string) =>
      (await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId } }, asUser(TENANT, member))).issueCoupon;
    expect(await issue('bob', 'spring')).toMatchObject({
      status: 'ALREADY_ISSUED',
      coupon: { id: 'b0000000-0000-4000-8000-000000000001' },
    });
    expect(await issue('alice', 'spring')).toMatchObject({
      status: 'ALREADY_ISSUED',
      coupon: { id: 'a0000000-0000-4000-8000-000000000002' },
    });
    expect(await issue('newcomer', 'spring')).toEqual({ status: 'BUDGET_EXCEEDED', coupon: null });
    expect(await issue('frank', 'winter-is-missing').catch(() => 'refused')).toBe('refused');
    expect((await issue('newcomer', 'autumn')).status).toBe('ISSUED');

    const contract = 'c1000000-0000-4000-8000-000000000001';
    const numbers = await Promise.all(
      Array.from(
        { length: 20 },
        async () =>
          (await gqlOk(backend.app.fetch, CreateContractDocumentDocument, { input: { contractId: contract } }, asUser('legacy-a')))
            .createContractDocument.document.docNumber,
      ),
    );
    expect(numbers.sort()).toEqual(Array.from({ length: 20 }, (_, i) => 10_000_005 + i));
  });

  it(
    'holds the coupon invariants under the concurrent reference scenario on the adopted database',
    async ({ annotate }) => {
      const backend = await backendOn(track(await adoptedDatabase()));
      const result = await runReferenceScenario(backend, 32);
      await annotate(describeRun('coupons on the adopted database at 32 clients', result));
      expect(result.invariants.violations).toEqual([]);
    },
    REFERENCE_SCENARIO_TIMEOUT_MS,
  );

  it('reconciliation reports the legacy overspend and cap as legacy, not as drift', async () => {
    const legacy = track(await adoptedDatabase());
    const backend = await backendOn(legacy);
    const ledger = (await gqlOk(backend.app.fetch, LedgerCheckDocument, {}, asTenantAdmin(TENANT))).ledgerCheck;
    expect(ledger.ok).toBe(true);
    expect(ledger.campaignDrift).toEqual([]);
    expect(ledger.campaignsOverBudget).toEqual([]);
    expect(ledger.legacyOverspend).toEqual([{ tenantId: TENANT, campaignId: 'spring', budgetYen: 3_000, couponsYen: 6_000 }]);
    expect(ledger.legacyMembersOverCap).toEqual([
      { tenantId: TENANT, memberId: 'frank', month: '2026-10', couponsYen: 2_500, capYen: 2_000 },
    ]);

    const reconcile = await runScript('src/entry/cli/reconcile.ts', { DATABASE_URL: legacy.url, LOG_LEVEL: 'warn' }, ['--tenant', TENANT]);
    expect(reconcile.output).toContain('ledger OK');
    expect(reconcile.output).toContain('legacy: campaigns adopted over budget (not drift): 1');
    expect(reconcile.code).toBe(0);
  });
});

describe('adoption that fails midway', () => {
  it('leaves the database exactly as it was', async () => {
    // A coupon of a campaign the legacy data never had: the copy fails after tables were moved.
    const broken = await legacyDatabase(
      "insert into issued_coupons values ('e0000000-0000-4000-8000-000000000009', 'winter', 'erin', '2026-10', 1000, now(), null)",
    );
    try {
      const before = await snapshot(broken.sql);
      await expect(adoptLegacyData(broken.database.db, { tenantId: TENANT, dryRun: false })).rejects.toThrow(/foreign key/);
      expect(await snapshot(broken.sql)).toEqual(before);
      expect(Object.keys(before).filter((t) => t.startsWith('legacy.'))).toEqual([]);
    } finally {
      await broken.database.close();
      await broken.sql.end();
    }
  });

  it('npm run db:adopt -- --dry-run prints the report and exits 0; without --tenant it explains and exits 2', async () => {
    const fresh = await legacyDatabase();
    try {
      const dry = await runScript('src/entry/cli/adopt.ts', { DATABASE_URL: fresh.url, LOG_LEVEL: 'warn' }, [
        '--tenant',
        TENANT,
        '--dry-run',
      ]);
      expect(dry.output).toContain('DRY RUN: nothing was changed.');
      expect(dry.output).toMatch(/campaigns over budget .*: 1/);
      expect(dry.code).toBe(0);
      const missing = await runScript('src/entry/cli/adopt.ts', { DATABASE_URL: fresh.url, LOG_LEVEL: 'warn' }, []);
      expect(missing.output).toMatch(/usage: npm run db:adopt/);
      expect(missing.code).toBe(2);
      const publicTables = await fresh.sql.query("select count(*)::int as n from information_schema.tables where table_schema = 'public'");
      expect(publicTables.rows[0].n).toBe(3);
      // npm start on such a database stops with the way out instead of a bare "already exists".
      await expect(migrate(fresh.database.db)).rejects.toThrow(/npm run db:adopt -- --tenant ID/);
    } finally {
      await fresh.database.close();
      await fresh.sql.end();
    }
  });
});
