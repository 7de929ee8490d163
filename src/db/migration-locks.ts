import { sql, type Kysely } from 'kysely';
import type { MigrationConfig } from '../core/config.js';
import type { DB } from './schema.js';

// The migration lock every migrating process takes, and the sessions a migration waited for,
// named in the errors that stop a start-up.

// Any constant works; it only has to be the same in every process that migrates this database.
export const MIGRATION_LOCK_KEY = 727_001;

/** A session that held a lock a migration waited for. */
export interface Blocker {
  pid: number;
  application: string;
  state: string | null;
  /** How long its transaction (or, outside one, its query) had run. */
  seconds: number;
  query: string;
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
export async function migrationLockHolders(db: Kysely<DB>): Promise<Blocker[]> {
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
export async function naming<T>(db: Kysely<DB>, pid: number, lockTimeoutMs: number, found: (b: Blocker[]) => void, work: () => Promise<T>) {
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

/** A duration as PostgreSQL's set_config takes it: whole milliseconds, at least 1 (0 would mean no limit). */
export const settingMs = (value: number) => String(Math.max(1, Math.floor(value)));
