import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import type { DB } from './schema.js';
import { SqlState, sqlStateOf } from './sqlstate.js';

// The migrations this code has (db/migrations/*.sql, in file-name order) and the ledger of the
// ones a database has applied (schema_migrations), with the index builds started and not yet
// recorded (schema_migration_builds).

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../db/migrations/', import.meta.url));

/** The first line of a migration that must run outside a transaction (CREATE INDEX CONCURRENTLY). */
const NO_TRANSACTION_MARKER = /^--\s*migrate:\s*no-transaction\b/;

export interface Migration {
  version: string;
  file: string;
}

export async function listMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((name) => /^\d{3,}_[\w-]+\.sql$/.test(name)).sort();
  return files.map((file) => ({ version: file.replace(/\.sql$/, ''), file: path.join(dir, file) }));
}

export interface LoadedMigration extends Migration {
  sql: string;
  transactional: boolean;
}

export async function loadMigration(migration: Migration): Promise<LoadedMigration> {
  const text = await readFile(migration.file, 'utf8');
  return { ...migration, sql: text, transactional: !NO_TRANSACTION_MARKER.test(text) };
}

/** The ledger of applied migrations and of the index builds started and not yet recorded. */
export async function createLedger(db: Kysely<DB>): Promise<void> {
  await sql`create table if not exists schema_migrations (
      version text primary key,
      applied_at timestamptz not null default now()
    )`.execute(db);
  await sql`create table if not exists schema_migration_builds (
      index_name text primary key,
      version text not null,
      started_at timestamptz not null default now()
    )`.execute(db);
}

export async function isRecorded(db: Kysely<DB>, version: string): Promise<boolean> {
  return (await db.selectFrom('schema_migrations').select('version').where('version', '=', version).executeTakeFirst()) !== undefined;
}

/** The versions recorded as applied; none when the ledger does not exist yet. */
export async function recordedVersions(db: Kysely<DB>): Promise<Set<string>> {
  const table = await sql<{ name: string | null }>`select to_regclass('schema_migrations')::text as name`.execute(db);
  if (!table.rows[0]?.name) return new Set();
  return new Set((await db.selectFrom('schema_migrations').select('version').execute()).map((row) => row.version));
}

export async function runMigrationSql(db: Kysely<DB>, migration: LoadedMigration): Promise<void> {
  try {
    await sql.raw(migration.sql).execute(db);
  } catch (error) {
    const state = sqlStateOf(error);
    if (state === SqlState.duplicateTable) {
      throw new Error(
        `Migration ${migration.version} found a table that already exists (${(error as Error).message}). ` +
          'If this database holds data from an earlier system, adopt it first: npm run db:adopt -- --tenant ID',
      );
    }
    if (state === SqlState.activeSqlTransaction && !migration.transactional) {
      throw new Error(
        `Migration ${migration.version} is marked no-transaction but holds more than one statement (${(error as Error).message}): ` +
          'give each CONCURRENTLY statement a file of its own',
      );
    }
    throw error;
  }
}

/**
 * A database whose schema is missing or behind this code. Tools other than the server only read or
 * work with the schema as it is, so they stop here (exit 2) rather than migrate a database someone
 * pointed them at.
 */
class SchemaNotReadyError extends Error {
  override name = 'SchemaNotReadyError';
  readonly exitCode = 2;
}

/** The migrations this code has that the database has not recorded; all of them when it has none. */
async function pendingMigrations(db: Kysely<DB>, dir = MIGRATIONS_DIR): Promise<string[]> {
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
