import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import { listMigrations } from '../../src/db/migration-ledger.js';
import type { DB } from '../../src/db/schema.js';

/**
 * The start-up migration this project replaced: every pending migration in one plain transaction,
 * with no lock_timeout and no statement_timeout, behind an advisory lock waited for without
 * limit. An ALTER TABLE queued behind a long reader waits for it, and every request that touches
 * the table queues behind the ALTER until its own timeouts answer TRY_AGAIN.
 */
export async function migrateInOneTransaction(db: Kysely<DB>, dir: string): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    // As it ran before the role's sessions started with LOCK_TIMEOUT_MS and STATEMENT_TIMEOUT_MS.
    await sql`set local lock_timeout = 0; set local statement_timeout = 0`.execute(trx);
    await sql`select pg_advisory_xact_lock(727001)`.execute(trx);
    const done = new Set((await trx.selectFrom('schema_migrations').select('version').execute()).map((r) => r.version));
    const applied: string[] = [];
    for (const migration of await listMigrations(dir)) {
      if (done.has(migration.version)) continue;
      await sql.raw(await readFile(migration.file, 'utf8')).execute(trx);
      await trx.insertInto('schema_migrations').values({ version: migration.version }).execute();
      applied.push(migration.version);
    }
    return applied;
  });
}

/**
 * The no-transaction runner as it was before the builds were written down: the invalid indexes it
 * finds when it starts are taken for someone else's, so the half-built index of a run killed
 * mid-build is among them, `CREATE INDEX CONCURRENTLY IF NOT EXISTS` skips it, and the migration
 * is recorded with the index invalid. Like it, a build whose lock wait (`lockTimeoutMs`) timed out
 * is tried again.
 */
export async function migrateTakingInvalidIndexesForOthers(db: Kysely<DB>, dir: string, lockTimeoutMs: number): Promise<string[]> {
  return db.connection().execute(async (conn) => {
    await sql`select set_config('lock_timeout', ${String(lockTimeoutMs)}, false)`.execute(conn);
    const invalid = async () => {
      const { rows } = await sql<{ name: string }>`
        select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid where not i.indisvalid`.execute(conn);
      return rows.map((row) => row.name);
    };
    const done = new Set((await conn.selectFrom('schema_migrations').select('version').execute()).map((r) => r.version));
    const applied: string[] = [];
    for (const migration of await listMigrations(dir)) {
      if (done.has(migration.version)) continue;
      const baseline = new Set(await invalid());
      const text = await readFile(migration.file, 'utf8');
      for (;;) {
        try {
          await sql.raw(text).execute(conn);
          break;
        } catch (error) {
          if ((error as { code?: string }).code !== '55P03') throw error;
          await sleep(100);
        }
      }
      const left = (await invalid()).filter((name) => !baseline.has(name));
      if (left.length > 0) throw new Error(`Migration ${migration.version} left ${left.join(', ')} invalid`);
      await conn.insertInto('schema_migrations').values({ version: migration.version }).execute();
      applied.push(migration.version);
    }
    return applied;
  });
}
