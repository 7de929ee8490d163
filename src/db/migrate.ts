import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.js';
import { SqlState, sqlStateOf } from './sqlstate.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../db/migrations/', import.meta.url));

// Any constant works; it only has to be the same in every process that migrates this database.
const MIGRATION_LOCK_KEY = 727_001;

export interface Migration {
  version: string;
  file: string;
}

export async function listMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((name) => /^\d{3,}_[\w-]+\.sql$/.test(name)).sort();
  return files.map((file) => ({ version: file.replace(/\.sql$/, ''), file: path.join(dir, file) }));
}

/**
 * Applies every migration not yet recorded, in file-name order, all in one transaction: a failing
 * migration leaves the schema as it was. A transaction-scoped advisory lock makes concurrent
 * start-ups (several processes, a pooler in transaction mode) take turns instead of racing.
 * Returns the versions applied now.
 */
export async function migrate(db: Kysely<DB>, dir = MIGRATIONS_DIR): Promise<string[]> {
  return db.transaction().execute((trx) => applyMigrations(trx, dir));
}

/** The migrations inside a transaction the caller owns (adoption runs them with its own work). */
export async function applyMigrations(trx: Transaction<DB>, dir = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await listMigrations(dir);
  await sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(trx);
  await sql`create table if not exists schema_migrations (
      version text primary key,
      applied_at timestamptz not null default now()
    )`.execute(trx);
  const done = new Set((await trx.selectFrom('schema_migrations').select('version').execute()).map((r) => r.version));
  const applied: string[] = [];
  for (const migration of migrations) {
    if (done.has(migration.version)) continue;
    try {
      await sql.raw(await readFile(migration.file, 'utf8')).execute(trx);
    } catch (error) {
      if (sqlStateOf(error) === SqlState.duplicateTable) {
        throw new Error(
          `Migration ${migration.version} found a table that already exists (${(error as Error).message}). ` +
            'If this database holds data from an earlier system, adopt it first: npm run db:adopt -- --tenant ID',
        );
      }
      throw error;
    }
    await trx.insertInto('schema_migrations').values({ version: migration.version }).execute();
    applied.push(migration.version);
  }
  return applied;
}

/**
 * A database whose schema is missing or behind this code. Tools other than the server only read or
 * work with the schema as it is, so they stop here (exit 2) rather than migrate a database someone
 * pointed them at.
 */
export class SchemaNotReadyError extends Error {
  override name = 'SchemaNotReadyError';
  readonly exitCode = 2;
}

/** The migrations this code has that the database has not recorded; all of them when it has none. */
export async function pendingMigrations(db: Kysely<DB>, dir = MIGRATIONS_DIR): Promise<string[]> {
  const known = (await listMigrations(dir)).map((migration) => migration.version);
  const table = await sql<{ name: string | null }>`select to_regclass('schema_migrations')::text as name`.execute(db);
  if (!table.rows[0]?.name) return known;
  const done = new Set((await db.selectFrom('schema_migrations').select('version').execute()).map((row) => row.version));
  return known.filter((version) => !done.has(version));
}

/** Throws SchemaNotReadyError unless every migration is applied; never changes the database. */
export async function assertSchemaCurrent(db: Kysely<DB>, dir = MIGRATIONS_DIR): Promise<void> {
  const pending = await pendingMigrations(db, dir);
  if (pending.length === 0) return;
  const known = await listMigrations(dir);
  throw new SchemaNotReadyError(
    pending.length === known.length
      ? 'This database has no schema of this project (no migration recorded). This tool does not migrate: check DATABASE_URL, or start the server once (it migrates at start-up).'
      : `This database's schema is behind this code: ${pending.join(', ')} not applied. This tool does not migrate: start the server once (it migrates at start-up).`,
  );
}
