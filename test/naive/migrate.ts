import { readFile } from 'node:fs/promises';
import { sql, type Kysely } from 'kysely';
import { listMigrations } from '../../src/db/migrate.js';
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
