import { sql, type Kysely } from 'kysely';
import type { MigrationConfig } from '../core/config.js';
import type { DB } from './schema.js';
import { createLedger, isRecorded, runMigrationSql, type LoadedMigration } from './migration-ledger.js';
import { MIGRATION_LOCK_KEY, MigrationLockBusyError, migrationLockHolders, settingMs, naming, type Blocker } from './migration-locks.js';
import { SqlState, sqlStateOf } from './sqlstate.js';

// A migration marked `-- migrate: no-transaction` (CREATE INDEX CONCURRENTLY), run outside any
// transaction on a session that holds the migration lock, its index known as the migrator's own.

async function invalidIndexes(db: Kysely<DB>): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid
      join pg_namespace n on n.oid = c.relnamespace
     where not i.indisvalid and n.nspname = current_schema()`.execute(db);
  return rows.map((r) => r.name);
}

type IndexState = 'absent' | 'valid' | 'invalid';

async function indexState(db: Kysely<DB>, name: string): Promise<IndexState> {
  const { rows } = await sql<{ valid: boolean }>`
    select i.indisvalid and i.indisready as valid from pg_index i join pg_class c on c.oid = i.indexrelid
      join pg_namespace n on n.oid = c.relnamespace
     where c.relname = ${name} and n.nspname = current_schema()`.execute(db);
  if (rows.length === 0) return 'absent';
  return rows[0]!.valid ? 'valid' : 'invalid';
}

/** `CREATE [UNIQUE] INDEX CONCURRENTLY [IF NOT EXISTS] name ON`, comments removed: the name it builds. */
const NAMED_CONCURRENT_BUILD =
  /^create\s+(?:unique\s+)?index\s+concurrently\s+(?:if\s+not\s+exists\s+)?("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\s+on\s/i;
const ANY_CONCURRENT_BUILD = /\bcreate\s+(?:unique\s+)?index\s+concurrently\b/i;

/**
 * The name of the index a no-transaction migration builds (as PostgreSQL stores it: unquoted
 * names folded to lower case), or null when it builds none. A build the migrator cannot name is
 * refused: it could not tell the half-built index of a killed run from someone else's.
 */
function indexBuiltBy(migration: { version: string; sql: string }): string | null {
  const statement = migration.sql.replace(/--[^\n]*/g, '').trim();
  const named = NAMED_CONCURRENT_BUILD.exec(statement);
  if (named) {
    const name = named[1]!;
    return name.startsWith('"') ? name.slice(1, -1).replace(/""/g, '"') : name.toLowerCase();
  }
  if (ANY_CONCURRENT_BUILD.test(statement)) {
    throw new Error(
      `Migration ${migration.version} builds an index CONCURRENTLY without a name: name it (CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON ...), ` +
        'so that the migrator knows a build that stopped half-way as its own',
    );
  }
  return null;
}

/** An invalid index by the name a migration builds that the migrator did not start: not the migrator's to drop. */
export class ForeignInvalidIndexError extends Error {
  override name = 'ForeignInvalidIndexError';
  constructor(
    readonly version: string,
    readonly index: string,
  ) {
    super(
      `Migration ${version} builds index ${index}, but an invalid index of that name is there that this migrator did not start ` +
        `(no row in schema_migration_builds): a CREATE INDEX CONCURRENTLY of someone else's that failed or still runs, or of a migrator ` +
        `older than that table. See whether a build still runs (select pid, query from pg_stat_progress_create_index join pg_stat_activity using (pid)); ` +
        `when none does, drop it (DROP INDEX CONCURRENTLY IF EXISTS ${index}) and start again.`,
    );
  }
}

/**
 * Takes the migration lock for the session, waiting at most MIGRATION_LOCK_WAIT_MS, until
 * released: a no-transaction migration holds it from its check to its record, so that no other
 * migrator builds, drops or records the same index meanwhile. A migrator killed mid-build leaves its
 * backend building, holding the lock until the build ends: the next migrator waits for it.
 */
async function lockSession(db: Kysely<DB>, conn: Kysely<DB>, settings: MigrationConfig): Promise<void> {
  await sql`select set_config('lock_timeout', ${settingMs(settings.lockWaitMs)}, false)`.execute(conn);
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
  } catch (error) {
    if (sqlStateOf(error) !== SqlState.lockNotAvailable) throw error;
    throw new MigrationLockBusyError(await migrationLockHolders(db).catch(() => []), settings.lockWaitMs);
  }
}

/**
 * The backend of a migrator killed mid-statement builds on (and holds the migration lock) until it
 * next writes to the dead socket; with this it checks every second and stops. PostgreSQL 14 and
 * later, on the systems that report a closed socket; elsewhere the build runs to its end.
 */
async function stopWhenClientGone(conn: Kysely<DB>): Promise<void> {
  await sql`select set_config('client_connection_check_interval', '1000', false)`.execute(conn).catch(() => undefined);
}

async function dropIndex(conn: Kysely<DB>, name: string): Promise<void> {
  await sql`drop index concurrently if exists ${sql.id(name)}`.execute(conn);
}

/**
 * Builds the index `index` of a CREATE INDEX CONCURRENTLY migration, known as the migrator's own by
 * a row of schema_migration_builds written before the build. What a run that stopped half-way left
 * is taken up: its invalid index is dropped and built again, its valid one kept. An invalid index
 * of that name that is not the migrator's own is refused.
 */
async function buildOwnIndex(conn: Kysely<DB>, migration: LoadedMigration, index: string): Promise<void> {
  const ours =
    (await conn.selectFrom('schema_migration_builds').select('version').where('index_name', '=', index).executeTakeFirst()) !== undefined;
  const state = await indexState(conn, index);
  if (state === 'valid') {
    if (ours) return; // built by a run that stopped before recording it
    return runMigrationSql(conn, migration); // someone else's valid index: IF NOT EXISTS keeps it, as written
  }
  if (state === 'invalid') {
    if (!ours) throw new ForeignInvalidIndexError(migration.version, index);
    await dropIndex(conn, index); // a build of ours that stopped half-way
  } else if (!ours) {
    await conn.insertInto('schema_migration_builds').values({ index_name: index, version: migration.version }).execute();
  }
  try {
    await runMigrationSql(conn, migration);
  } catch (error) {
    // A build that failed (a lock wait timed out) leaves its index invalid; else the next attempt drops it.
    if ((await indexState(conn, index)) === 'invalid') await dropIndex(conn, index).catch(() => undefined);
    throw error;
  }
}

/** Any other no-transaction statement: an index it leaves invalid (a REINDEX CONCURRENTLY that failed) is dropped, and stops the migration. */
async function runAlone(conn: Kysely<DB>, migration: LoadedMigration): Promise<void> {
  const before = new Set(await invalidIndexes(conn));
  const newlyInvalid = async () => (await invalidIndexes(conn)).filter((name) => !before.has(name));
  try {
    await runMigrationSql(conn, migration);
  } catch (error) {
    for (const name of await newlyInvalid()) await dropIndex(conn, name).catch(() => undefined);
    throw error;
  }
  const left = await newlyInvalid();
  if (left.length > 0) {
    throw new Error(
      `Migration ${migration.version} left ${left.join(', ')} invalid (its build failed). Drop it (DROP INDEX CONCURRENTLY ${left[0]}) and start again.`,
    );
  }
}

/** Records a no-transaction migration as applied, and its build as done, once its index is valid. */
async function recordOutside(conn: Kysely<DB>, version: string, index: string | null): Promise<void> {
  await conn.transaction().execute(async (trx) => {
    if (index !== null) {
      const state = await indexState(trx, index);
      if (state !== 'valid') throw new Error(`Migration ${version} left index ${index} ${state}; not recorded as applied. Start again.`);
      await trx.deleteFrom('schema_migration_builds').where('index_name', '=', index).execute();
    }
    await trx
      .insertInto('schema_migrations')
      .values({ version })
      .onConflict((c) => c.doNothing())
      .execute();
  });
}

/**
 * One migration marked `-- migrate: no-transaction` (a single statement such as CREATE INDEX
 * CONCURRENTLY, which cannot run in a transaction), on a connection of its own that holds the
 * migration lock from the check to the record, with the migrator's timeouts set for the session and
 * reset after. An index it builds is written down as the migrator's before the build; the migration
 * is recorded only once that index is valid, and a build that stopped half-way (a lock wait that
 * timed out, a migrator killed) is dropped and built again by the next attempt or run.
 */
export async function applyOutsideTransaction(
  db: Kysely<DB>,
  migration: LoadedMigration,
  settings: MigrationConfig,
  found: (b: Blocker[]) => void,
): Promise<boolean> {
  const index = indexBuiltBy(migration);
  return db.connection().execute(async (conn) => {
    const { rows } = await sql<{ pid: number }>`
      select pg_backend_pid() as pid,
             set_config('statement_timeout', ${settingMs(Math.max(settings.lockWaitMs, settings.statementTimeoutMs))}, false)`.execute(
      conn,
    );
    try {
      await lockSession(db, conn, settings);
      await sql`select set_config('lock_timeout', ${settingMs(settings.lockTimeoutMs)}, false),
                       set_config('statement_timeout', ${settingMs(settings.statementTimeoutMs)}, false)`.execute(conn);
      await stopWhenClientGone(conn);
      await createLedger(conn);
      if (await isRecorded(conn, migration.version)) return false;
      await naming(db, rows[0]!.pid, settings.lockTimeoutMs, found, () =>
        index === null ? runAlone(conn, migration) : buildOwnIndex(conn, migration, index),
      );
      await recordOutside(conn, migration.version, index);
      return true;
    } finally {
      await sql
        .raw('select pg_advisory_unlock_all(); reset lock_timeout; reset statement_timeout')
        .execute(conn)
        .catch(() => undefined);
      await sql`reset client_connection_check_interval`.execute(conn).catch(() => undefined);
    }
  });
}
