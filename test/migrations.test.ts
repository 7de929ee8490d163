import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MigrationConfig } from '../src/core/config.js';
import { ForeignInvalidIndexError } from '../src/db/migrate-concurrently.js';
import { migrate } from '../src/db/migrate.js';
import { MIGRATIONS_DIR } from '../src/db/migration-ledger.js';
import { MigrationBlockedError, MigrationLockBusyError, type Blocker } from '../src/db/migration-locks.js';
import type { LoadResult } from './load/run.js';
import type { GraphQLReply } from './load/client.js';
import { couponsScenario } from './load/scenarios/coupons.js';
import { startSteadyLoad } from './load/steady-load.js';
import { migrateInOneTransaction } from './naive/migrate.js';
import { createTestBackend, createTestDatabaseUrl, serveOverHttp, TEST_APP, type TestBackend } from './support/harness.js';
import { openToolDatabase } from './support/tool-database.js';
import { waitFor } from './support/wait.js';

/** The project's migrations plus `extra` (file name -> SQL), in a folder of their own. */
async function migrationsWith(extra: Record<string, string>): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-migrations-'));
  for (const file of await readdir(MIGRATIONS_DIR)) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(dir, file));
  for (const [file, text] of Object.entries(extra)) await writeFile(path.join(dir, file), text);
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** A session of the test's own, outside the app's pool: the long reader, the other migrator. */
async function session(url: string): Promise<pg.Client & { pid: number }> {
  const client = new pg.Client({ connectionString: url, application_name: 'long-reader' });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  return Object.assign(client, { pid: rows[0]!.pid });
}

const settings = (overrides: Partial<MigrationConfig> = {}): MigrationConfig => ({
  lockTimeoutMs: 100,
  statementTimeoutMs: 30_000,
  retryForMs: 60_000,
  lockWaitMs: 10_000,
  ...overrides,
});

const ALTER_CAMPAIGNS = { '900_campaign_note.sql': 'ALTER TABLE campaigns ADD COLUMN note text;\n' };

async function columnExists(backend: TestBackend, table: string, column: string): Promise<boolean> {
  const { rows } = await backend.sql.query('select 1 from information_schema.columns where table_name = $1 and column_name = $2', [
    table,
    column,
  ]);
  return rows.length === 1;
}

/** Steady coupon traffic over HTTP (open model, never resent), until stopped. */
async function couponTraffic(backend: TestBackend, rate: number) {
  const { url, server } = await serveOverHttp(backend);
  const coupons = couponsScenario(`migration-${Date.now().toString(36)}`, null);
  // A TRY_AGAIN counted with its reason: a request stalled behind the migration's lock gives up
  // on a lock wait (55P03, LOCK_TIMEOUT_MS), one that a busy machine slowed on another.
  const scenario = { ...coupons, outcomeOf: (reply: GraphQLReply) => withReason(coupons.outcomeOf(reply), reply) };
  const load = startSteadyLoad({ url, scenario, rate, connections: 32 });
  await load.started;
  return {
    async stop(): Promise<LoadResult> {
      try {
        return await load.stop();
      } finally {
        await server.close();
      }
    },
  };
}

const withReason = (outcome: string, reply: GraphQLReply) =>
  outcome === 'TRY_AGAIN' ? `TRY_AGAIN ${String(reply.body.errors?.[0]?.extensions?.['reason'])}` : outcome;

/** The answers that are neither a coupon nor a refusal, by outcome (a TRY_AGAIN with its reason). */
const errorsOf = (result: LoadResult) =>
  Object.fromEntries(Object.entries(result.outcomes).filter(([outcome]) => !['ISSUED', 'ALREADY_ISSUED', 'MONTHLY_CAP'].includes(outcome)));

const errorCount = (result: LoadResult) => Object.values(errorsOf(result)).reduce((sum, count) => sum + count, 0);

/**
 * At most as many errors as the same traffic met with no migration, just before, in the same
 * share of its requests (twice it, and one request more): a busy machine fails some requests of a
 * 2 s deadline whatever the migration does, while traffic stalled behind a migration's lock fails
 * most of those sent meanwhile.
 */
function expectNoWorseThan(baseline: LoadResult, result: LoadResult) {
  const allowed = Math.floor((2 * errorCount(baseline) * result.requests) / Math.max(1, baseline.requests)) + 1;
  expect(
    errorCount(result),
    `${JSON.stringify(errorsOf(result))}; with no migration ${JSON.stringify(errorsOf(baseline))}`,
  ).toBeLessThanOrEqual(allowed);
}

/**
 * Requests that gave up behind a lock: on a lock wait, a statement cut short by the server or by
 * the client's own limit (`unanswered`, which a busy machine's late answers reach first), or their deadline.
 */
const stalledOf = (result: LoadResult) =>
  Object.entries(result.outcomes)
    .filter(([outcome]) => /^TRY_AGAIN (55P03|57014|deadline|unanswered)$/.test(outcome))
    .reduce((sum, [, count]) => sum + count, 0);

/** The next version's start-up: a pool of its own beside the serving one. */
function nextVersion(backend: TestBackend) {
  return openToolDatabase(backend.databaseUrl, 'next-version', { max: 2, log: backend.log });
}

describe('a migration under traffic, behind a long reader', () => {
  // Requests give up quickly (a deadline of 2 s, lock waits of 500 ms), so that a migration that
  // stalls them shows within seconds; the migration's own lock waits are shorter still.
  const env = { LOCK_TIMEOUT_MS: '500', REQUEST_DEADLINE_MS: '2000' };
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env });
  });
  afterAll(() => backend.close());

  it('leaves coupon traffic unharmed: short lock waits, retried until the reader is gone, and the reader named meanwhile', async () => {
    const migrations = await migrationsWith(ALTER_CAMPAIGNS);
    const reader = await session(backend.databaseUrl);
    const withoutMigration = await couponTraffic(backend, 30);
    await sleep(3_000);
    const baseline = await withoutMigration.stop();
    const traffic = await couponTraffic(backend, 30);
    const next = nextVersion(backend);
    try {
      await sleep(500);
      await reader.query('begin');
      await reader.query('select count(*) from campaigns');
      const timeouts: { attempt: number; blockers: Blocker[] }[] = [];
      let released = false;
      const applied = await migrate(next.db, migrations.dir, {
        settings: settings(),
        onLockTimeout: (version, attempt, blockers) => {
          expect(version).toBe('900_campaign_note');
          timeouts.push({ attempt, blockers });
          // The reader goes on for a few of the migration's attempts, then ends.
          if (timeouts.length === 5 && !released) {
            released = true;
            void reader.query('commit');
          }
        },
      });
      expect(applied).toEqual(['900_campaign_note']);
      expect(timeouts.length).toBeGreaterThanOrEqual(5);
      expect(timeouts.flatMap((t) => t.blockers.map((b) => b.pid))).toContain(reader.pid);
      await sleep(500);
      const result = await traffic.stop();
      expect(result.requests).toBeGreaterThan(0);
      expectNoWorseThan(baseline, result);
      expect(await columnExists(backend, 'campaigns', 'note')).toBe(true);
    } finally {
      await reader.end();
      await next.close();
      await migrations.remove();
    }
  });

  it('the naive migration (one plain transaction, no lock_timeout) stalls the same traffic behind the reader', async () => {
    const migrations = await migrationsWith({ '901_campaign_remark.sql': 'ALTER TABLE campaigns ADD COLUMN remark text;\n' });
    const reader = await session(backend.databaseUrl);
    const traffic = await couponTraffic(backend, 30);
    const next = nextVersion(backend);
    try {
      await sleep(500);
      await reader.query('begin');
      await reader.query('select count(*) from campaigns');
      const migrating = migrateInOneTransaction(next.db, migrations.dir);
      // The reader outlasts a request's whole deadline: everything queued behind the ALTER gives up.
      await sleep(2 * Number(env.REQUEST_DEADLINE_MS));
      await reader.query('commit');
      expect(await migrating).toContain('901_campaign_remark');
      const result = await traffic.stop();
      expect(stalledOf(result), JSON.stringify(result.outcomes)).toBeGreaterThan(0);
    } finally {
      await reader.end();
      await next.close();
      await migrations.remove();
    }
  });
});

describe('the migrator', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it('a migration that cannot take its lock within MIGRATION_RETRY_FOR_MS stops start-up, naming it and the blocking pid', async () => {
    const migrations = await migrationsWith({ '902_campaign_tag.sql': 'ALTER TABLE campaigns ADD COLUMN tag text;\n' });
    const reader = await session(backend.databaseUrl);
    try {
      await reader.query('begin');
      await reader.query('select count(*) from campaigns');
      const failed = await migrate(backend.database.db, migrations.dir, { settings: settings({ retryForMs: 1_500 }) }).catch(
        (e: unknown) => e,
      );
      expect(failed).toBeInstanceOf(MigrationBlockedError);
      const message = (failed as Error).message;
      expect(message).toContain('Migration 902_campaign_tag could not take its locks within MIGRATION_RETRY_FOR_MS (1500 ms');
      expect(message).toContain(`pid ${reader.pid} (application "long-reader"`);
      expect(message).toContain('select count(*) from campaigns');
      expect(await columnExists(backend, 'campaigns', 'tag')).toBe(false);
    } finally {
      await reader.end();
      await migrations.remove();
    }
  });

  it('waits for another migrator at most MIGRATION_LOCK_WAIT_MS, naming it', async () => {
    const migrations = await migrationsWith({ '903_campaign_flag.sql': 'ALTER TABLE campaigns ADD COLUMN flag boolean;\n' });
    const other = await session(backend.databaseUrl);
    try {
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock(727001)');
      const failed = await migrate(backend.database.db, migrations.dir, { settings: settings({ lockWaitMs: 300 }) }).catch(
        (e: unknown) => e,
      );
      expect(failed).toBeInstanceOf(MigrationLockBusyError);
      expect((failed as Error).message).toContain('Another process held the migration lock for more than MIGRATION_LOCK_WAIT_MS (300 ms)');
      expect((failed as Error).message).toContain(`pid ${other.pid}`);
      await other.query('commit');
      expect(await migrate(backend.database.db, migrations.dir, { settings: settings() })).toEqual(['903_campaign_flag']);
    } finally {
      await other.end();
      await migrations.remove();
    }
  });

  it('runs each migration in a transaction of its own: a failing one leaves those before it applied, and itself not at all', async () => {
    const migrations = await migrationsWith({
      '904_good.sql': 'ALTER TABLE campaigns ADD COLUMN good text;\n',
      '905_bad.sql': 'ALTER TABLE campaigns ADD COLUMN half text;\nSELECT 1 / 0;\n',
    });
    try {
      await expect(migrate(backend.database.db, migrations.dir, { settings: settings() })).rejects.toThrow(/division by zero/);
      expect(await columnExists(backend, 'campaigns', 'good')).toBe(true);
      expect(await columnExists(backend, 'campaigns', 'half')).toBe(false);
      const { rows } = await backend.sql.query("select version from schema_migrations where version like '90%' order by 1");
      expect(rows.map((r) => r.version)).toContain('904_good');
      expect(rows.map((r) => r.version)).not.toContain('905_bad');
    } finally {
      await migrations.remove();
    }
  });

  it('a no-transaction migration builds its index CONCURRENTLY: writes go on while it waits, and a failed build is dropped and tried again', async () => {
    const migrations = await migrationsWith({
      '906_coupons_by_issue.sql':
        '-- migrate: no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS coupons_by_issue ON coupons (issued_at);\n',
    });
    // A snapshot older than the build: CREATE INDEX CONCURRENTLY waits for it, past MIGRATION_LOCK_TIMEOUT_MS.
    const reader = await session(backend.databaseUrl);
    try {
      await reader.query('begin isolation level repeatable read');
      await reader.query('select count(*) from coupons');
      let attempts = 0;
      const writes: number[] = [];
      const migrating = migrate(backend.database.db, migrations.dir, {
        settings: settings({ lockTimeoutMs: 200 }),
        onLockTimeout: async (_version, attempt) => {
          attempts = attempt;
          // Writes to the table go on meanwhile: CONCURRENTLY locks nothing they need.
          const { rowCount } = await backend.sql.query(
            "insert into audit_log (tenant_id, role, operation, entity_ids, request_id) values ('t', 'admin', 'probe', '{}', 'r')",
          );
          writes.push(rowCount ?? 0);
          if (attempt === 3) await reader.query('commit');
        },
      });
      expect(await migrating).toEqual(['906_coupons_by_issue']);
      expect(attempts).toBeGreaterThanOrEqual(3);
      expect(writes.every((n) => n === 1)).toBe(true);
      const { rows } = await backend.sql.query<{ valid: boolean }>(
        "select i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = 'coupons_by_issue'",
      );
      expect(rows).toEqual([{ valid: true }]);
    } finally {
      await reader.end();
      await migrations.remove();
    }
  });

  it("an invalid index by the name a migration builds: someone else's stops start-up, saying what to do; the runner's own (a build that stopped half-way) is dropped and built again", async () => {
    const version = '910_coupons_by_amount';
    const migrations = await migrationsWith({
      [`${version}.sql`]:
        '-- migrate: no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS coupons_by_amount ON coupons (amount_yen);\n',
    });
    const index = async () =>
      (
        await backend.sql.query<{ table: string; valid: boolean }>(
          "select indrelid::regclass::text as table, indisvalid as valid from pg_index where indexrelid = to_regclass('coupons_by_amount')",
        )
      ).rows;
    const recorded = async () => (await backend.sql.query('select 1 from schema_migrations where version = $1', [version])).rowCount;
    try {
      // A unique build that meets duplicates fails half-way and leaves its index invalid: as a killed one does.
      await backend.sql.query('create table crash_dup (x int); insert into crash_dup values (1), (1)');
      await expect(backend.sql.query('create unique index concurrently coupons_by_amount on crash_dup (x)')).rejects.toThrow(
        /could not create unique index/,
      );
      expect(await index()).toEqual([{ table: 'crash_dup', valid: false }]);

      const refused = await migrate(backend.database.db, migrations.dir, { settings: settings() }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ForeignInvalidIndexError);
      expect((refused as Error).message).toContain('DROP INDEX CONCURRENTLY IF EXISTS coupons_by_amount');
      expect(await index()).toEqual([{ table: 'crash_dup', valid: false }]);
      expect(await recorded()).toBe(0);

      // What a runner killed mid-build leaves: the build written down, its index invalid.
      await backend.sql.query('insert into schema_migration_builds (index_name, version) values ($1, $2)', ['coupons_by_amount', version]);
      expect(await migrate(backend.database.db, migrations.dir, { settings: settings() })).toEqual([version]);
      expect(await index()).toEqual([{ table: 'coupons', valid: true }]);
      expect(await recorded()).toBe(1);
      expect((await backend.sql.query("select 1 from schema_migration_builds where index_name = 'coupons_by_amount'")).rowCount).toBe(0);
    } finally {
      await backend.sql.query('drop index if exists coupons_by_amount; drop table if exists crash_dup');
      await migrations.remove();
    }
  });

  it('two migrators starting at once on a concurrent build take turns: the index is built once, valid, and recorded once', async () => {
    const version = '912_coupons_by_month';
    const migrations = await migrationsWith({
      [`${version}.sql`]: '-- migrate: no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS coupons_by_month ON coupons (month);\n',
    });
    // A writer the builds wait behind, so that both migrators are at the build at once.
    const writer = await session(backend.databaseUrl);
    const other = nextVersion(backend);
    try {
      await writer.query('begin');
      await writer.query('lock table coupons in row exclusive mode');
      const migrating = [backend.database.db, other.db].map((db) => migrate(db, migrations.dir, { settings: settings() }));
      // One waits behind the writer in its build, the other for the migration lock the first holds.
      await waitFor(async () => {
        const { rows } = await backend.sql.query<{ waiting: number }>(
          "select count(*)::int as waiting from pg_stat_activity where datname = current_database() and application_name in ($1, 'next-version') and wait_event_type = 'Lock'",
          [TEST_APP],
        );
        return rows[0]!.waiting >= 2 ? true : undefined;
      }, 'both migrators waiting');
      await writer.query('commit');
      const applied = (await Promise.all(migrating)).flat();
      expect(applied).toEqual([version]);
      const { rows } = await backend.sql.query<{ valid: boolean }>(
        "select indisvalid as valid from pg_index where indexrelid = to_regclass('coupons_by_month')",
      );
      expect(rows).toEqual([{ valid: true }]);
      const { rowCount } = await backend.sql.query('select 1 from schema_migrations where version = $1', [version]);
      expect(rowCount).toBe(1);
    } finally {
      await writer.end();
      await other.close();
      await backend.sql.query('drop index if exists coupons_by_month');
      await migrations.remove();
    }
  });

  it('refuses a CREATE INDEX CONCURRENTLY without a name, which it could not know as its own', async () => {
    const migrations = await migrationsWith({
      '911_unnamed.sql': '-- migrate: no-transaction\nCREATE INDEX CONCURRENTLY ON coupons (amount_yen);\n',
    });
    try {
      await expect(migrate(backend.database.db, migrations.dir, { settings: settings() })).rejects.toThrow(
        'Migration 911_unnamed builds an index CONCURRENTLY without a name: name it',
      );
      const { rowCount } = await backend.sql.query(
        "select 1 from pg_indexes where tablename = 'coupons' and indexdef like '%(amount_yen)%'",
      );
      expect(rowCount).toBe(0);
    } finally {
      await migrations.remove();
    }
  });

  it("runs under its own timeouts, not the role's: a session default of 100 ms cuts neither a statement nor the wait for the migration lock", async () => {
    // What the server sets for every session of its role (LOCK_TIMEOUT_MS, STATEMENT_TIMEOUT_MS), shortened.
    const url = await createTestDatabaseUrl();
    const admin = await session(url);
    await admin.query(`alter role current_user in database ${pg.escapeIdentifier(new URL(url).pathname.slice(1))}
                         set statement_timeout = '100ms'`);
    await admin.query(
      `alter role current_user in database ${pg.escapeIdentifier(new URL(url).pathname.slice(1))} set lock_timeout = '50ms'`,
    );
    const migrations = await migrationsWith({
      '908_slow.sql': 'SELECT pg_sleep(0.3);\n',
      '909_slow_alone.sql': '-- migrate: no-transaction\nSELECT pg_sleep(0.3);\n',
    });
    const database = nextVersion({ ...backend, databaseUrl: url });
    const other = await session(url);
    try {
      const { rows } = await other.query<{ statement_timeout: string }>('show statement_timeout');
      expect(rows[0]!.statement_timeout).toBe('100ms');
      // Another migrator holds the lock for longer than the role lets a statement wait.
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock(727001)');
      const migrating = migrate(database.db, migrations.dir, { settings: settings() });
      await sleep(400);
      await other.query('commit');
      expect(await migrating).toEqual(['908_slow', '909_slow_alone']);
    } finally {
      await other.end();
      await admin.end();
      await database.close();
      await migrations.remove();
    }
  });

  it('refuses a no-transaction migration of more than one statement, saying what to do', async () => {
    const migrations = await migrationsWith({
      '907_two.sql':
        '-- migrate: no-transaction\nCREATE INDEX CONCURRENTLY a_idx ON coupons (month);\nCREATE INDEX CONCURRENTLY b_idx ON coupons (amount_yen);\n',
    });
    try {
      await expect(migrate(backend.database.db, migrations.dir, { settings: settings() })).rejects.toThrow(
        'Migration 907_two is marked no-transaction but holds more than one statement',
      );
    } finally {
      await migrations.remove();
    }
  });
});
