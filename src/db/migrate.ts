import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely, type Transaction } from 'kysely';
import { MIGRATION_DEFAULTS, type MigrationConfig } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import type { DB } from './schema.js';
import { CLIENT_LIMIT_MARGIN_MS, LONG_WORK_LIMIT_MS, withCallLimit } from './scope.js';
import { SqlState, sqlStateOf } from './sqlstate.js';
import { fullJitter } from './transaction.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../db/migrations/', import.meta.url));

// Any constant works; it only has to be the same in every process that migrates this database.
const MIGRATION_LOCK_KEY = 727_001;

/** The first line of a migration that must run outside a transaction (CREATE INDEX CONCURRENTLY). */
export const NO_TRANSACTION_MARKER = /^--\s*migrate:\s*no-transaction\b/;

/** Pauses between attempts of a migration whose locks timed out: full jitter, at most 2 s. */
const MIGRATION_BACKOFF = { baseDelayMs: 100, maxDelayMs: 2_000 } as const;

export interface Migration {
  version: string;
  file: string;
}

export async function listMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((name) => /^\d{3,}_[\w-]+\.sql$/.test(name)).sort();
  return files.map((file) => ({ version: file.replace(/\.sql$/, ''), file: path.join(dir, file) }));
}

interface LoadedMigration extends Migration {
  sql: string;
  transactional: boolean;
}

async function loadMigration(migration: Migration): Promise<LoadedMigration> {
  const text = await readFile(migration.file, 'utf8');
  return { ...migration, sql: text, transactional: !NO_TRANSACTION_MARKER.test(text) };
}

/** A session that held a lock a migration waited for. */
export interface Blocker {
  pid: number;
  application: string;
  state: string | null;
  /** How long its transaction (or, outside one, its query) had run. */
  seconds: number;
  query: string;
}

export interface MigrateOptions {
  settings?: MigrationConfig;
  log?: Logger;
  /** Told of every attempt whose locks timed out, with the sessions it waited for; the next attempt waits for it. */
  onLockTimeout?: (version: string, attempt: number, blockers: Blocker[]) => void | Promise<void>;
}

/** A migration that could not take its locks within MIGRATION_RETRY_FOR_MS; start-up stops on it. */
export class MigrationBlockedError extends Error {
  override name = 'MigrationBlockedError';
  constructor(
    readonly version: string,
    readonly attempts: number,
    readonly blockers: Blocker[],
    settings: MigrationConfig,
  ) {
    super(
      `Migration ${version} could not take its locks within MIGRATION_RETRY_FOR_MS (${settings.retryForMs} ms: ${attempts} attempts, ` +
        `each waiting at most MIGRATION_LOCK_TIMEOUT_MS = ${settings.lockTimeoutMs} ms). ${describeBlockers(blockers)}`,
    );
  }
}

/** Another process held the migration lock for longer than MIGRATION_LOCK_WAIT_MS. */
export class MigrationLockBusyError extends Error {
  override name = 'MigrationLockBusyError';
  constructor(
    readonly holders: Blocker[],
    lockWaitMs: number,
  ) {
    super(
      `Another process held the migration lock for more than MIGRATION_LOCK_WAIT_MS (${lockWaitMs} ms). ` +
        (holders.length
          ? `It is ${holders.map((h) => `pid ${h.pid} (application "${h.application}", ${h.state ?? 'unknown state'}: ${h.query})`).join(', ')}.`
          : 'It let go before it could be named.') +
        ' Start again when it is done.',
    );
  }
}

function describeBlockers(blockers: Blocker[]): string {
  if (blockers.length === 0) return 'The session that held the lock could not be named (it let go between two looks). Start again.';
  const named = blockers.map(
    (b) => `pid ${b.pid} (application "${b.application}", ${b.state ?? 'unknown state'} for ${b.seconds} s: ${b.query})`,
  );
  const pids = blockers.map((b) => b.pid).join(', ');
  return `Blocked by ${named.join('; ')}. Let it finish or end it (select pg_terminate_backend(pid) for pid ${pids}), then start again.`;
}

/** The sessions `pid` is waiting for, read from another connection while it waits. */
async function blockersOf(db: Kysely<DB>, pid: number): Promise<Blocker[]> {
  const { rows } = await sql<Blocker>`
    select pid, application_name as application, state,
           extract(epoch from now() - coalesce(xact_start, query_start))::int as seconds,
           left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 200) as query
      from pg_stat_activity where pid = any(pg_blocking_pids(${pid}::int))
     order by pid`.execute(db);
  return rows;
}

/** Who holds the migration lock (another process migrating). */
async function migrationLockHolders(db: Kysely<DB>): Promise<Blocker[]> {
  const { rows } = await sql<Blocker>`
    select a.pid, a.application_name as application, a.state,
           extract(epoch from now() - coalesce(a.xact_start, a.query_start))::int as seconds,
           left(regexp_replace(a.query, '[[:space:]]+', ' ', 'g'), 200) as query
      from pg_locks l join pg_stat_activity a on a.pid = l.pid
     where l.locktype = 'advisory' and l.granted and l.classid = 0 and l.objid = ${MIGRATION_LOCK_KEY} and l.objsubid = 1`.execute(db);
  return rows;
}

/**
 * Runs `work` (a statement of `pid`'s that may wait for a lock); half-way through the lock
 * timeout, looks from another connection at whom it waits for, so that a timeout can name them.
 */
async function naming<T>(db: Kysely<DB>, pid: number, lockTimeoutMs: number, found: (b: Blocker[]) => void, work: () => Promise<T>) {
  const look = setTimeout(
    () =>
      void blockersOf(db, pid).then(
        (blockers) => blockers.length > 0 && found(blockers),
        () => undefined, // no connection to spare: the error message says less, nothing else changes
      ),
    lockTimeoutMs / 2,
  );
  try {
    return await work();
  } finally {
    clearTimeout(look);
  }
}

const ms = (value: number) => String(Math.max(1, Math.floor(value)));

/** The ledger of applied migrations and of the index builds started and not yet recorded. */
async function createLedger(db: Kysely<DB>): Promise<void> {
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

async function isRecorded(db: Kysely<DB>, version: string): Promise<boolean> {
  return (await db.selectFrom('schema_migrations').select('version').where('version', '=', version).executeTakeFirst()) !== undefined;
}

/**
 * Takes the transaction-scoped migration lock, waiting at most MIGRATION_LOCK_WAIT_MS: processes
 * starting at once take turns, and a pooler in transaction mode keeps the lock with the
 * transaction. Then makes sure the ledger of applied migrations exists and says whether `version`
 * is in it.
 */
async function lockAndCheck(db: Kysely<DB>, trx: Transaction<DB>, version: string, settings: MigrationConfig): Promise<boolean> {
  const { lockWaitMs } = settings;
  // Local to this transaction, so they win over the role's own timeouts (LOCK_TIMEOUT_MS and
  // STATEMENT_TIMEOUT_MS, set for every session of the role): the wait for the lock is the
  // migrator's to bound.
  await sql`select set_config('lock_timeout', ${ms(lockWaitMs)}, true),
                   set_config('statement_timeout', ${ms(Math.max(lockWaitMs, settings.statementTimeoutMs))}, true)`.execute(trx);
  try {
    await sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(trx);
  } catch (error) {
    if (sqlStateOf(error) !== SqlState.lockNotAvailable) throw error;
    throw new MigrationLockBusyError(await migrationLockHolders(db).catch(() => []), lockWaitMs);
  }
  await createLedger(trx);
  return isRecorded(trx, version);
}

/** One transactional migration in a transaction of its own; false when another process applied it first. */
async function applyInTransaction(
  db: Kysely<DB>,
  migration: LoadedMigration,
  settings: MigrationConfig,
  found: (b: Blocker[]) => void,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (await lockAndCheck(db, trx, migration.version, settings)) return false;
    const { rows } = await sql<{ pid: number }>`
      select pg_backend_pid() as pid, set_config('lock_timeout', ${ms(settings.lockTimeoutMs)}, true),
             set_config('statement_timeout', ${ms(settings.statementTimeoutMs)}, true)`.execute(trx);
    await naming(db, rows[0]!.pid, settings.lockTimeoutMs, found, () => runMigrationSql(trx, migration));
    await trx.insertInto('schema_migrations').values({ version: migration.version }).execute();
    return true;
  });
}

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
  await sql`select set_config('lock_timeout', ${ms(settings.lockWaitMs)}, false)`.execute(conn);
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
async function applyOutsideTransaction(
  db: Kysely<DB>,
  migration: LoadedMigration,
  settings: MigrationConfig,
  found: (b: Blocker[]) => void,
): Promise<boolean> {
  const index = indexBuiltBy(migration);
  return db.connection().execute(async (conn) => {
    const { rows } = await sql<{ pid: number }>`
      select pg_backend_pid() as pid,
             set_config('statement_timeout', ${ms(Math.max(settings.lockWaitMs, settings.statementTimeoutMs))}, false)`.execute(conn);
    try {
      await lockSession(db, conn, settings);
      await sql`select set_config('lock_timeout', ${ms(settings.lockTimeoutMs)}, false),
                       set_config('statement_timeout', ${ms(settings.statementTimeoutMs)}, false)`.execute(conn);
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

async function runMigrationSql(db: Kysely<DB>, migration: LoadedMigration): Promise<void> {
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

/** The versions recorded as applied; none when the ledger does not exist yet. */
async function recordedVersions(db: Kysely<DB>): Promise<Set<string>> {
  const table = await sql<{ name: string | null }>`select to_regclass('schema_migrations')::text as name`.execute(db);
  if (!table.rows[0]?.name) return new Set();
  return new Set((await db.selectFrom('schema_migrations').select('version').execute()).map((row) => row.version));
}

/**
 * Applies every migration not yet recorded, in file-name order, each in a transaction of its own
 * (or, marked `-- migrate: no-transaction`, outside any), so that a deploy never queues the hot
 * path behind its DDL for long:
 *
 * - every statement runs with a short `lock_timeout` (MIGRATION_LOCK_TIMEOUT_MS) and a
 *   `statement_timeout` (MIGRATION_STATEMENT_TIMEOUT_MS): requests wait behind a queued lock for
 *   at most the former;
 * - a migration whose locks time out is rolled back and tried again after a pause with full
 *   jitter, for at most MIGRATION_RETRY_FOR_MS; then start-up fails with a MigrationBlockedError
 *   naming the sessions it waited for (pid, application, query);
 * - the transaction-scoped migration lock makes concurrent start-ups take turns, each waiting at
 *   most MIGRATION_LOCK_WAIT_MS for it, and re-checking under it what another already applied (a
 *   no-transaction migration holds it for its session, from its check to its record);
 * - an index a CONCURRENTLY build leaves invalid, because it failed or its migrator was killed, is
 *   the migrator's own by a row of schema_migration_builds written before the build: dropped and
 *   built again, and the migration recorded only once the index is valid.
 *
 * A failing migration leaves the schema as it was before that migration. Returns the versions
 * applied now.
 */
export async function migrate(db: Kysely<DB>, dir = MIGRATIONS_DIR, options: MigrateOptions = {}): Promise<string[]> {
  const settings = options.settings ?? MIGRATION_DEFAULTS;
  return withCallLimit(migrationCallLimitMs(settings), () => migrateEach(db, dir, options, settings));
}

/**
 * How long the client waits for one statement of the migrator: past PostgreSQL's own limits on it
 * (MIGRATION_STATEMENT_TIMEOUT_MS, or MIGRATION_LOCK_WAIT_MS on the migration lock), so that the
 * database's own cancel, which names the cause, comes first whenever the path works.
 */
function migrationCallLimitMs(settings: MigrationConfig): number {
  return Math.max(LONG_WORK_LIMIT_MS, Math.max(settings.statementTimeoutMs, settings.lockWaitMs) + CLIENT_LIMIT_MARGIN_MS);
}

async function migrateEach(db: Kysely<DB>, dir: string, options: MigrateOptions, settings: MigrationConfig): Promise<string[]> {
  const recorded = await recordedVersions(db);
  const applied: string[] = [];
  for (const listed of await listMigrations(dir)) {
    if (recorded.has(listed.version)) continue;
    const migration = await loadMigration(listed);
    const started = Date.now();
    let blockers: Blocker[] = [];
    for (let attempt = 1; ; attempt++) {
      blockers = [];
      const found = (named: Blocker[]) => (blockers = named);
      try {
        const done = migration.transactional
          ? await applyInTransaction(db, migration, settings, found)
          : await applyOutsideTransaction(db, migration, settings, found);
        if (done) applied.push(migration.version);
        break;
      } catch (error) {
        if (sqlStateOf(error) !== SqlState.lockNotAvailable) throw error;
        await options.onLockTimeout?.(migration.version, attempt, blockers);
        const pauseMs = fullJitter(MIGRATION_BACKOFF, attempt);
        if (Date.now() - started + pauseMs + settings.lockTimeoutMs > settings.retryForMs) {
          throw new MigrationBlockedError(migration.version, attempt, blockers, settings);
        }
        options.log?.warn(
          { migration: migration.version, attempt, blockedBy: blockers.map((b) => b.pid), pauseMs: Math.round(pauseMs) },
          'a migration waited MIGRATION_LOCK_TIMEOUT_MS for a lock; trying it again',
        );
        await sleep(pauseMs);
      }
    }
  }
  return applied;
}

/**
 * The migrations inside a transaction the caller owns (adoption runs them with its own work, on
 * tables that take no traffic yet). A no-transaction migration runs there without CONCURRENTLY,
 * which cannot run in a transaction and changes nothing of the result.
 */
export async function applyMigrations(trx: Transaction<DB>, dir = MIGRATIONS_DIR): Promise<string[]> {
  await sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(trx);
  await createLedger(trx);
  const done = new Set((await trx.selectFrom('schema_migrations').select('version').execute()).map((r) => r.version));
  const applied: string[] = [];
  for (const listed of await listMigrations(dir)) {
    if (done.has(listed.version)) continue;
    const migration = await loadMigration(listed);
    const text = migration.transactional ? migration.sql : migration.sql.replace(/\bCONCURRENTLY\b/gi, '');
    await runMigrationSql(trx, { ...migration, sql: text });
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
