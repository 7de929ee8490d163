import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import type { DB } from './schema.js';

const DEMO_SEED = fileURLToPath(new URL('../../db/seed/demo.sql', import.meta.url));

/** Loads the demo data when the database has no tenant at all; returns whether it did. */
export async function seedIfEmpty(db: Kysely<DB>): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    // Two processes starting at once must not both see "empty" and both seed.
    await sql`lock table tenants in share row exclusive mode`.execute(trx);
    const any = await trx.selectFrom('tenants').select('id').limit(1).executeTakeFirst();
    if (any) return false;
    await sql.raw(await readFile(DEMO_SEED, 'utf8')).execute(trx);
    return true;
  });
}
