import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { describeTarget, parseDatabaseUrl } from '../core/database-url.js';
import type { Logger } from '../core/logger.js';
import { clientClass, ConnectError, DatabasePath } from './client.js';
import { withCallLimit } from './transaction-mark.js';

/**
 * Start-up against a database that is not there yet (a container still booting, a failover in
 * progress) or refuses us (a password being rotated): keep trying for a while, say what we try,
 * then stop with a message that names the variable to check.
 */

const ATTEMPT_TIMEOUT_MS = 5_000;
/** Even the last attempt gets a fair chance to finish its handshake. */
const SHORTEST_ATTEMPT_MS = 1_000;
const FIRST_PAUSE_MS = 250;
const LONGEST_PAUSE_MS = 2_000;

/** Where DATABASE_URL points, for a banner or a message: `db1:5432,db2:5432/app` (never the password). */
export function describeDatabaseUrl(connectionString: string): string {
  return describeTarget(parseDatabaseUrl(connectionString));
}

class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError';
}

/**
 * A connection outside any pool, to the first host of `connectionString` that answers as its
 * target (the same factory as the pools': target_session_attrs, keepalive, limits). Throws
 * ConnectError with every host's reason when none does.
 */
export async function connectOutsidePool(
  connectionString: string,
  timeoutMs: number,
  onHostFailed?: (host: string, port: number, reason: string) => void,
): Promise<pg.Client> {
  const path = new DatabasePath(parseDatabaseUrl(connectionString));
  const { Client } = clientClass({
    path,
    connectTimeoutMs: timeoutMs,
    statementTimeoutMs: timeoutMs,
    preparedStatements: false,
    stallsEvict: false,
  });
  const failures: ConnectError['failures'] = [];
  for (let tried = 0; tried < path.hosts.length; tried++) {
    const host = path.hosts[path.firstHost()]!;
    const client = new Client();
    client.on('error', () => {}); // a server that goes away mid-handshake: the rejected connect() tells us
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      if (!(error instanceof ConnectError)) throw error;
      failures.push(...error.failures);
      onHostFailed?.(host.host, host.port, error.failures[0]?.message ?? error.message);
    }
  }
  throw new ConnectError(failures);
}

/** One connection and `select 1`, outside any pool (see connectOutsidePool). */
async function pingDatabase(
  connectionString: string,
  timeoutMs: number,
  onHostFailed?: (host: string, port: number, reason: string) => void,
) {
  const client = await connectOutsidePool(connectionString, timeoutMs, onHostFailed);
  try {
    await withCallLimit(timeoutMs, () => client.query('select 1'));
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Resolves once a connection to `connectionString` (the value of DATABASE_URL) answers; logs one
 * line per failed host and attempt and throws DatabaseUnreachableError naming DATABASE_URL after `timeoutMs`.
 */
export async function waitForDatabase(connectionString: string, timeoutMs: number, log: Logger): Promise<void> {
  const target = parseDatabaseUrl(connectionString);
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    let reason = '';
    try {
      await pingDatabase(
        connectionString,
        Math.max(SHORTEST_ATTEMPT_MS, Math.min(ATTEMPT_TIMEOUT_MS, deadline - Date.now())),
        (host, port, why) => {
          reason = why;
          if (deadline - Date.now() > 0)
            log.warn({ host, port, database: target.database, attempt, reason: why }, 'database not reachable yet; trying again');
        },
      );
      if (attempt > 1) log.info({ database: describeTarget(target), attempt }, 'database reachable');
      return;
    } catch (error) {
      reason = error instanceof ConnectError ? error.reasons : error instanceof Error ? error.message : String(error);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new DatabaseUnreachableError(
          `Could not connect to the database that DATABASE_URL names (${describeTarget(target)}) ` +
            `within DB_CONNECT_TIMEOUT_MS=${timeoutMs} (${attempt} attempts): ${reason}. ` +
            'Check DATABASE_URL (host, port, database, user, password) and that the server accepts connections.',
        );
      }
      await sleep(Math.min(left, LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (attempt - 1)));
    }
  }
}
