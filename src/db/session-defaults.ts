import { connectOutsidePool } from './connect.js';
import type { Logger } from '../core/logger.js';

/** The timeouts a one-statement unit runs under, as every new session of the app's role starts with them. */
export interface SessionTimeouts {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
}

/** How long opening the connection that sets them may take (DB_POOL_CONNECT_TIMEOUT_MS). */
export interface SetupConnection {
  poolConnectTimeoutMs: number;
}

// Any constant works; every process that sets the defaults of one database uses the same one.
const SESSION_DEFAULTS_LOCK_KEY = 727_002;

/** The settings as pg_db_role_setting stores them: `name=value`. */
const wanted = (timeouts: SessionTimeouts) => [
  `lock_timeout=${Math.floor(timeouts.lockTimeoutMs)}ms`,
  `statement_timeout=${Math.floor(timeouts.statementTimeoutMs)}ms`,
];

/**
 * Makes every new session of this role in this database start with LOCK_TIMEOUT_MS and
 * STATEMENT_TIMEOUT_MS (`ALTER ROLE CURRENT_USER IN DATABASE … SET`), so that a statement sent
 * outside a transaction block runs under them (docs/design.md §5). Unlike a session's own SET this
 * is safe behind a pooler in transaction mode: PgBouncer's server connections are sessions of the
 * role too. A transaction of the runner still sets its own with SET LOCAL. Runs on a connection of
 * its own, so that the pool's sessions all start after it; a session opened earlier (a pooler's)
 * keeps the old values, which the one-statement units detect and then run as transactions.
 * Returns false, after a warning, when the role may not set them.
 */
export async function applySessionTimeouts(
  connectionString: string,
  timeouts: SessionTimeouts & SetupConnection,
  log: Logger,
): Promise<boolean> {
  let client: Awaited<ReturnType<typeof connectOutsidePool>> | null = null;
  try {
    client = await connectOutsidePool(connectionString, timeouts.poolConnectTimeoutMs);
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock($1)', [SESSION_DEFAULTS_LOCK_KEY]);
    const current = await client.query<{ setconfig: string[] | null }>(
      `select setconfig from pg_db_role_setting
        where setrole = (select oid from pg_roles where rolname = current_user)
          and setdatabase = (select oid from pg_database where datname = current_database())`,
    );
    const present = new Set(current.rows[0]?.setconfig ?? []);
    const missing = wanted(timeouts).filter((setting) => !present.has(setting));
    for (const setting of missing) {
      const [name, value] = setting.split('=') as [string, string];
      // ALTER ROLE takes no parameters; the name is one of ours and the value a whole number of ms.
      await client.query(
        `do $$ begin execute format('alter role current_user in database %I set ${name} = %L', current_database(), '${value}'); end $$`,
      );
    }
    await client.query('commit');
    if (missing.length) log.info({ set: missing }, "the role's sessions in this database start with the runner's timeouts");
    return true;
  } catch (error) {
    log.warn(
      { err: { message: (error as Error).message, code: (error as { code?: unknown }).code } },
      'could not set the role timeouts for new sessions; coupon issues run as transactions (one round trip per statement)',
    );
    return false;
  } finally {
    await client?.end().catch(() => {});
  }
}
