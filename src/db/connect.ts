import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from '../logger.js';

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

/** Host, port and database of a connection string: what a log line may show (never the password). */
export function describeDatabaseUrl(connectionString: string): { host: string; port: number; database: string } {
  const url = new URL(connectionString);
  const user = decodeURIComponent(url.username);
  return {
    host: url.searchParams.get('host') ?? (url.hostname || 'localhost'),
    port: Number(url.port || 5432),
    database: decodeURIComponent(url.pathname.slice(1)) || user,
  };
}

export class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError';
}

/** One connection and `select 1`, outside any pool: a full pool is not a database that is away. */
export async function pingDatabase(connectionString: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => {}); // a server that goes away mid-handshake: the rejected connect() tells us
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Resolves once a connection to `connectionString` (the value of DATABASE_URL) answers; logs one
 * line per failed attempt and throws DatabaseUnreachableError naming DATABASE_URL after `timeoutMs`.
 */
export async function waitForDatabase(connectionString: string, timeoutMs: number, log: Logger): Promise<void> {
  const target = describeDatabaseUrl(connectionString);
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await pingDatabase(connectionString, Math.max(SHORTEST_ATTEMPT_MS, Math.min(ATTEMPT_TIMEOUT_MS, deadline - Date.now())));
      if (attempt > 1) log.info({ ...target, attempt }, 'database reachable');
      return;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new DatabaseUnreachableError(
          `Could not connect to the database that DATABASE_URL names (${target.host}:${target.port}/${target.database}) ` +
            `within DB_CONNECT_TIMEOUT_MS=${timeoutMs} (${attempt} attempts): ${reason}. ` +
            'Check DATABASE_URL (host, port, database, user, password) and that the server accepts connections.',
        );
      }
      log.warn({ ...target, attempt, reason }, 'database not reachable yet; trying again');
      await sleep(Math.min(left, LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (attempt - 1)));
    }
  }
}

/**
 * While the process runs: checks every `intervalMs` that the database answers. While it does not,
 * each check logs an error (an operator tailing the log sees the outage as it lasts); the first
 * check that succeeds again logs that it is back. The pool replaces its broken connections by
 * itself, so nothing else has to happen for requests to succeed again.
 */
export function watchDatabase(connectionString: string, intervalMs: number, log: Logger): { stop(): void } {
  const target = describeDatabaseUrl(connectionString);
  let downSince: number | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const check = async () => {
    try {
      await pingDatabase(connectionString, Math.min(ATTEMPT_TIMEOUT_MS, Math.max(SHORTEST_ATTEMPT_MS, intervalMs)));
      if (downSince !== null) log.info({ ...target, downForMs: Date.now() - downSince }, 'database available again');
      downSince = null;
    } catch (error) {
      downSince ??= Date.now();
      const reason = error instanceof Error ? error.message : String(error);
      log.error(
        { ...target, reason, downForMs: Date.now() - downSince },
        'database unavailable: requests answer TRY_AGAIN until it is back',
      );
    }
    if (!stopped) timer = setTimeout(() => void check(), intervalMs).unref();
  };
  timer = setTimeout(() => void check(), intervalMs).unref();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
