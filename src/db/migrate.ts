import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely, type Transaction } from 'kysely';
import { MIGRATION_DEFAULTS, type MigrationConfig } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import { applyOutsideTransaction } from './migrate-concurrently.js';
import {
  createLedger,
  isRecorded,
  listMigrations,
  loadMigration,
  MIGRATIONS_DIR,
  recordedVersions,
  runMigrationSql,
  type LoadedMigration,
} from './migration-ledger.js';
import {
  MIGRATION_LOCK_KEY,
  MigrationBlockedError,
  MigrationLockBusyError,
  migrationLockHolders,
  settingMs,
  naming,
  type Blocker,
} from './migration-locks.js';
import type { DB } from './schema.js';
import { CLIENT_LIMIT_MARGIN_MS, LONG_WORK_LIMIT_MS, withCallLimit } from './transaction-mark.js';
import { SqlState, sqlStateOf } from './sqlstate.js';
import { fullJitter } from './transaction.js';

/** Pauses between attempts of a migration whose locks timed out: full jitter, at most 2 s. */
const MIGRATION_BACKOFF = { baseDelayMs: 100, maxDelayMs: 2_000 } as const;

export interface MigrateOptions {
  settings?: MigrationConfig;
  log?: Logger;
  /** Told of every attempt whose locks timed out, with the sessions it waited for; the next attempt waits for it. */
  onLockTimeout?: (version: string, attempt: number, blockers: Blocker[]) => void | Promise<void>;
}

/**
 * Takes the transaction-level migration lock, waiting at most MIGRATION_LOCK_WAIT_MS: processes
 * starting at once take turns, and a pooler in transaction mode keeps the lock with the
 * transaction. Then makes sure the ledger of applied migrations exists and says whether `version`
 * is in it.
 */
async function lockAndCheck(db: Kysely<DB>, trx: Transaction<DB>, version: string, settings: MigrationConfig): Promise<boolean> {
  const { lockWaitMs } = settings;
  // Local to this transaction, so they win over the role's own timeouts (LOCK_TIMEOUT_MS and
  // STATEMENT_TIMEOUT_MS, set for every session of the role): the wait for the lock is the
  // migrator's to bound.
  await sql`select set_config('lock_timeout', ${settingMs(lockWaitMs)}, true),
                   set_config('statement_timeout', ${settingMs(Math.max(lockWaitMs, settings.statementTimeoutMs))}, true)`.execute(trx);
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
      select pg_backend_pid() as pid, set_config('lock_timeout', ${settingMs(settings.lockTimeoutMs)}, true),
             set_config('statement_timeout', ${settingMs(settings.statementTimeoutMs)}, true)`.execute(trx);
    await naming(db, rows[0]!.pid, settings.lockTimeoutMs, found, () => runMigrationSql(trx, migration));
    await trx.insertInto('schema_migrations').values({ version: migration.version }).execute();
    return true;
  });
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
 * - the transaction-level migration lock makes concurrent start-ups take turns, each waiting at
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
