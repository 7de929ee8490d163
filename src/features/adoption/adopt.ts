import { sql, type Kysely, type Transaction } from 'kysely';
import { applyMigrations } from '../../db/migrate.js';
import type { DB } from '../../db/schema.js';
import { DEFAULT_MONTHLY_CAP_YEN } from '../tenants/service.js';

/**
 * Adoption of a database that the racy versions already damaged (npm run db:adopt). The legacy
 * tables are moved to the `legacy` schema, the project's schema is brought up beside them, and
 * every row is copied across: nothing is deleted, the damage is marked and reported, and the
 * invariants guard every write from then on. All of it is one transaction: it succeeds
 * completely or leaves the database as it was.
 */

const LEGACY_SCHEMA = 'legacy';
const LEGACY_TABLES = ['campaigns', 'issued_coupons', 'contract_documents'] as const;
/** Legacy names the project does not use itself: always legacy wherever they are found in public. */
const LEGACY_ONLY = new Set(['issued_coupons']);
const ADOPTED_CONTRACT_TITLE = 'Adopted contract';

export interface AdoptionReport {
  tenantId: string;
  dryRun: boolean;
  /** A previous run adopted this data already; nothing was changed. */
  alreadyAdopted: boolean;
  /** Legacy tables moved into the legacy schema by this run. */
  movedTables: string[];
  migrationsApplied: string[];
  rows: { tenants: number; contracts: number; documents: number; campaigns: number; coupons: number; usageRows: number };
  duplicateCoupons: { groups: number; voided: number; keptRedeemed: number };
  overspend: { campaignId: string; budgetYen: number; issuedYen: number; overspendYen: number }[];
  membersOverCap: { memberId: string; month: string; couponsYen: number; capYen: number }[];
  sequences: { tenantId: string; lastDocNumber: number }[];
  duplicateDocumentNumbers: { tenantId: string; docNumber: number; documents: number }[];
}

class DryRunRollback extends Error {
  constructor(readonly report: AdoptionReport) {
    super('dry run: rolled back');
  }
}

async function tableExists(trx: Transaction<DB>, schema: string, table: string): Promise<boolean> {
  const { rows } = await sql<{ found: boolean }>`select to_regclass(${`${schema}.${table}`}) is not null as found`.execute(trx);
  return rows[0]!.found;
}

/**
 * Moves legacy tables out of the way. Before the project's schema exists, every legacy name in
 * public is legacy data; afterwards, only names the project never uses (issued_coupons).
 */
async function moveLegacyTables(trx: Transaction<DB>): Promise<string[]> {
  const projectSchemaExists = await tableExists(trx, 'public', 'schema_migrations');
  await sql`create schema if not exists ${sql.id(LEGACY_SCHEMA)}`.execute(trx);
  const moved: string[] = [];
  for (const table of LEGACY_TABLES) {
    if (projectSchemaExists && !LEGACY_ONLY.has(table)) continue;
    if (!(await tableExists(trx, 'public', table))) continue;
    if (await tableExists(trx, LEGACY_SCHEMA, table))
      throw new Error(`both public.${table} and ${LEGACY_SCHEMA}.${table} exist; resolve by hand`);
    await sql`alter table ${sql.table(`public.${table}`)} set schema ${sql.id(LEGACY_SCHEMA)}`.execute(trx);
    moved.push(table);
  }
  return moved;
}

const legacy = (table: string) => sql.table(`${LEGACY_SCHEMA}.${table}`);

async function adoptDocuments(trx: Transaction<DB>, report: AdoptionReport) {
  if (!(await tableExists(trx, LEGACY_SCHEMA, 'contract_documents'))) return;
  const docs = legacy('contract_documents');
  report.rows.tenants += Number(
    (await sql`insert into tenants (id, name) select distinct tenant_id, tenant_id from ${docs} on conflict (id) do nothing`.execute(trx))
      .numAffectedRows ?? 0,
  );
  report.rows.contracts = Number(
    (
      await sql`insert into contracts (tenant_id, id, title, adopted)
        select distinct tenant_id, contract_id, ${ADOPTED_CONTRACT_TITLE}, true from ${docs}
        on conflict (tenant_id, id) do nothing`.execute(trx)
    ).numAffectedRows ?? 0,
  );
  // Documents that share a number keep it: the earliest is the number's owner, the rest are marked.
  report.rows.documents = Number(
    (
      await sql`insert into contract_documents (tenant_id, id, contract_id, doc_number, created_at, legacy_duplicate_number)
        select tenant_id, id, contract_id, doc_number, created_at,
               row_number() over (partition by tenant_id, doc_number order by created_at, id) > 1
          from ${docs}
        on conflict (tenant_id, id) do nothing`.execute(trx)
    ).numAffectedRows ?? 0,
  );
  report.duplicateDocumentNumbers = (
    await sql<{ tenant_id: string; doc_number: number; documents: number }>`
      select tenant_id, doc_number, count(*)::int as documents from ${docs}
       group by tenant_id, doc_number having count(*) > 1 order by 1, 2`.execute(trx)
  ).rows.map((r) => ({ tenantId: r.tenant_id, docNumber: r.doc_number, documents: r.documents }));
  // Each tenant's sequence continues after its highest number, whatever the legacy code did.
  report.sequences = (
    await sql<{ tenant_id: string; last_doc_number: number }>`
      insert into document_sequences (tenant_id, last_doc_number)
      select tenant_id, max(doc_number) from ${docs} group by tenant_id
      on conflict (tenant_id) do update
        set last_doc_number = greatest(document_sequences.last_doc_number, excluded.last_doc_number), updated_at = now()
      returning tenant_id, last_doc_number`.execute(trx)
  ).rows
    .map((r) => ({ tenantId: r.tenant_id, lastDocNumber: r.last_doc_number }))
    .sort((a, b) => a.tenantId.localeCompare(b.tenantId));
}

async function adoptCoupons(trx: Transaction<DB>, tenantId: string, report: AdoptionReport) {
  const hasCampaigns = await tableExists(trx, LEGACY_SCHEMA, 'campaigns');
  const hasCoupons = await tableExists(trx, LEGACY_SCHEMA, 'issued_coupons');
  if (!hasCampaigns && !hasCoupons) return;
  report.rows.tenants += Number(
    (
      await sql`insert into tenants (id, name, monthly_cap_yen) values (${tenantId}, ${tenantId}, ${DEFAULT_MONTHLY_CAP_YEN}) on conflict (id) do nothing`.execute(
        trx,
      )
    ).numAffectedRows ?? 0,
  );
  if (hasCampaigns) {
    report.rows.campaigns = Number(
      (
        await sql`insert into campaigns (tenant_id, id, name, discount_yen, budget_yen)
          select ${tenantId}, campaign_id, campaign_id, discount_yen, budget_yen from ${legacy('campaigns')}
          on conflict (tenant_id, id) do nothing`.execute(trx)
      ).numAffectedRows ?? 0,
    );
  }
  if (hasCoupons) {
    // Per member and campaign the redeemed coupon (else the earliest) stays the coupon; the
    // others are legacy duplicates, voided unless already redeemed against an order.
    const inserted = await sql<{ legacy_duplicate: boolean; voided: boolean }>`
      insert into coupons (tenant_id, id, campaign_id, member_id, month, amount_yen, issued_at, redeemed_at,
                           adopted, legacy_duplicate, voided_at)
      select ${tenantId}, coupon_id, campaign_id, member_id, month, amount_yen, issued_at, redeemed_at, true,
             rank > 1, case when rank > 1 and redeemed_at is null then now() end
        from (select c.*, row_number() over (
                       partition by campaign_id, member_id
                       order by redeemed_at is null, redeemed_at, issued_at, coupon_id) as rank
                from ${legacy('issued_coupons')} c) ranked
      on conflict (tenant_id, id) do nothing
      returning legacy_duplicate, voided_at is not null as voided`.execute(trx);
    report.rows.coupons = inserted.rows.length;
    report.duplicateCoupons.voided = inserted.rows.filter((r) => r.voided).length;
    report.duplicateCoupons.keptRedeemed = inserted.rows.filter((r) => r.legacy_duplicate && !r.voided).length;
    report.duplicateCoupons.groups = Number(
      (
        await sql<{ n: number }>`select count(*)::int as n from (select 1 from ${legacy('issued_coupons')}
          group by campaign_id, member_id having count(*) > 1) d`.execute(trx)
      ).rows[0]!.n,
    );
  }
  await rebuildCounters(trx, tenantId, report);
}

/**
 * Budget counters and member-month usage rebuilt from the coupons that are not voided; the legacy
 * counters are not trusted. A campaign already over budget is adopted as it is: its budget check
 * is re-added NOT VALID, so it guards every new write without rejecting the past.
 */
async function rebuildCounters(trx: Transaction<DB>, tenantId: string, report: AdoptionReport) {
  await sql`alter table campaign_budget_slots drop constraint campaign_budget_slots_within_budget`.execute(trx);
  await sql`
    insert into campaign_budget_slots (tenant_id, campaign_id, slot, budget_yen, issued_yen)
    select c.tenant_id, c.id, 0, c.budget_yen,
           coalesce((select sum(k.amount_yen) from coupons k
                      where k.tenant_id = c.tenant_id and k.campaign_id = c.id and k.voided_at is null), 0)
      from campaigns c
     where c.tenant_id = ${tenantId} and c.budget_slots = 1
    on conflict (tenant_id, campaign_id, slot) do update set issued_yen = excluded.issued_yen`.execute(trx);
  // An adopted campaign ran before it was adopted: it started with its first coupon (or now, with none).
  await sql`
    update campaigns c set starts_at = k.first_issued_at
      from (select campaign_id, min(issued_at) as first_issued_at from coupons where tenant_id = ${tenantId} group by campaign_id) k
     where c.tenant_id = ${tenantId} and c.id = k.campaign_id and k.first_issued_at < c.starts_at`.execute(trx);
  const overspent = await sql<{ campaign_id: string; budget_yen: number; issued_yen: number }>`
    update campaigns c set adopted_overspend_yen = s.issued_yen - s.budget_yen
      from campaign_budget_slots s
     where s.tenant_id = c.tenant_id and s.campaign_id = c.id and c.tenant_id = ${tenantId} and s.issued_yen > s.budget_yen
    returning c.id as campaign_id, s.budget_yen, s.issued_yen`.execute(trx);
  report.overspend = overspent.rows
    .map((r) => ({
      campaignId: r.campaign_id,
      budgetYen: r.budget_yen,
      issuedYen: r.issued_yen,
      overspendYen: r.issued_yen - r.budget_yen,
    }))
    .sort((a, b) => a.campaignId.localeCompare(b.campaignId));
  await sql
    .raw(
      `alter table campaign_budget_slots add constraint campaign_budget_slots_within_budget check (issued_yen <= budget_yen)${
        report.overspend.length > 0 ? ' not valid' : ''
      }`,
    )
    .execute(trx);

  report.rows.usageRows = Number(
    (
      await sql`
        insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
        select tenant_id, member_id, month, sum(amount_yen) from coupons
         where tenant_id = ${tenantId} and voided_at is null
         group by tenant_id, member_id, month
        on conflict (tenant_id, member_id, month) do update set used_yen = excluded.used_yen`.execute(trx)
    ).numAffectedRows ?? 0,
  );
  report.membersOverCap = (
    await sql<{ member_id: string; month: string; used_yen: number; cap: number }>`
      select u.member_id, u.month, u.used_yen, t.monthly_cap_yen as cap
        from member_monthly_usage u join tenants t on t.id = u.tenant_id
       where u.tenant_id = ${tenantId} and u.used_yen > t.monthly_cap_yen
       order by 1, 2`.execute(trx)
  ).rows.map((r) => ({ memberId: r.member_id, month: r.month, couponsYen: r.used_yen, capYen: r.cap }));
}

function emptyReport(tenantId: string, dryRun: boolean): AdoptionReport {
  return {
    tenantId,
    dryRun,
    alreadyAdopted: false,
    movedTables: [],
    migrationsApplied: [],
    rows: { tenants: 0, contracts: 0, documents: 0, campaigns: 0, coupons: 0, usageRows: 0 },
    duplicateCoupons: { groups: 0, voided: 0, keptRedeemed: 0 },
    overspend: [],
    membersOverCap: [],
    sequences: [],
    duplicateDocumentNumbers: [],
  };
}

/**
 * Adopts the legacy tables into the project's schema for `tenantId` (the coupon data's tenant;
 * documents carry their own). A second run finds its adoption recorded and changes nothing; a
 * dry run does everything and rolls it back.
 *
 * @example const report = await adoptLegacyData(db, { tenantId, dryRun: true })
 */
export async function adoptLegacyData(db: Kysely<DB>, options: { tenantId: string; dryRun: boolean }): Promise<AdoptionReport> {
  try {
    return await db.transaction().execute(async (trx) => {
      const report = emptyReport(options.tenantId, options.dryRun);
      report.movedTables = await moveLegacyTables(trx);
      report.migrationsApplied = await applyMigrations(trx);
      const previous = await trx.selectFrom('adoptions').select('id').limit(1).executeTakeFirst();
      if (previous) {
        report.alreadyAdopted = true;
      } else if (LEGACY_TABLES.some((table) => report.movedTables.includes(table))) {
        await adoptDocuments(trx, report);
        await adoptCoupons(trx, options.tenantId, report);
        await trx
          .insertInto('adoptions')
          .values({ tenant_id: options.tenantId, report: JSON.stringify(report) })
          .execute();
      }
      if (options.dryRun) throw new DryRunRollback(report);
      return report;
    });
  } catch (error) {
    if (error instanceof DryRunRollback) return error.report;
    throw error;
  }
}
