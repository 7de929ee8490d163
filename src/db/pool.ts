import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import type { PostgresPool } from 'kysely';
import type { Logger } from '../logger.js';
import { inSpan, tracing } from '../tracing.js';
import { preparedNameOf } from './prepared.js';

/**
 * The executor rule, enforced at run time: while an async context holds a transaction, asking the
 * pool for another connection is a bug. With a pool of N, N requests that each hold one
 * connection and wait for a second hang until something times out; refusing the second
 * `connect()` turns that hang into an immediate, named error. Queries on the transaction reuse
 * its connection and never call `connect()`, so only the mistake is caught.
 */
interface TransactionMark {
  holding: boolean;
  /** What BEGIN sets for this transaction (see TimedPostgresDriver). */
  timeouts: TransactionTimeouts;
}

/** Transaction-scoped settings, in whole milliseconds. */
export interface TransactionTimeouts {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

const transactionScope = new AsyncLocalStorage<TransactionMark>();

/** Runs `fn` in a fresh scope; `hold()` marks the moment the scope's transaction owns its connection. */
export function withTransactionScope<T>(timeouts: TransactionTimeouts, fn: (hold: (holding: boolean) => void) => Promise<T>): Promise<T> {
  const mark: TransactionMark = { holding: false, timeouts };
  return transactionScope.run(mark, () =>
    fn((holding) => {
      mark.holding = holding;
    }),
  );
}

/** The timeouts of the transaction this async context is opening, if the runner opens it. */
export function currentTransactionTimeouts(): TransactionTimeouts | undefined {
  return transactionScope.getStore()?.timeouts;
}

/**
 * Runs `fn` outside any transaction's scope: background work a request starts (a budget lease
 * refill) takes a connection of its own and must not count as the request's second one.
 */
export function outsideTransactionScope<T>(fn: () => T): T {
  return transactionScope.exit(fn);
}

export function isHoldingTransaction(): boolean {
  return transactionScope.getStore()?.holding === true;
}

export class PoolReentryError extends Error {
  constructor() {
    super(
      'A second pool connection was requested while this request holds a transaction. ' +
        'Pass the transaction (trx) down to every query of the unit of work.',
    );
    this.name = 'PoolReentryError';
  }
}

export class PoolExhaustedError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`No database connection became free within ${timeoutMs} ms`);
    this.name = 'PoolExhaustedError';
  }
}

export interface PoolOptions {
  connectionString: string;
  max: number;
  acquireTimeoutMs: number;
  applicationName: string;
  /** Run the hot statements as named prepared statements (DB_PREPARED_STATEMENTS; see prepared.ts). */
  preparedStatements: boolean;
}

const INT8_OID = 20;

/** count(*) and sums come back as int8; every such value here fits in a JS number. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * A client that runs each statement of prepared.ts under its name: pg then parses it once per
 * connection and only binds and executes it afterwards. Every other statement stays unnamed.
 */
class PreparingClient extends pg.Client {
  override query(...args: unknown[]): never {
    const [text, values, callback] = args;
    const name = typeof text === 'string' && Array.isArray(values) ? preparedNameOf(text) : undefined;
    const query = super.query as (...args: unknown[]) => never;
    return name === undefined ? query.apply(this, args) : query.call(this, { name, text, values }, callback);
  }
}

export interface GuardedPool {
  /** What Kysely's dialect is given: `connect()` refuses re-entry and turns a wait timeout into PoolExhaustedError. */
  kyselyPool: PostgresPool;
  /** The raw pool, for metrics and shutdown. */
  raw: pg.Pool;
}

export function createGuardedPool(options: PoolOptions, log: Logger): GuardedPool {
  const raw = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max,
    // pg's default of 0 waits forever for a free connection: the hang this project exists to prevent.
    connectionTimeoutMillis: options.acquireTimeoutMs,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName,
    types,
    ...(options.preparedStatements ? { Client: PreparingClient } : {}),
  });
  // Without these listeners a database restart emits 'error' on an idle or checked-out client and
  // the whole process dies. The pool drops a broken client on release; the next request gets a new one.
  raw.on('error', (error) => {
    log.warn({ err: errorSummary(error) }, 'idle database connection failed; the pool will replace it');
  });
  raw.on('connect', (client) => {
    client.on('error', (error) => {
      log.warn({ err: errorSummary(error) }, 'database connection failed while checked out');
    });
  });

  const kyselyPool: PostgresPool = {
    async connect() {
      if (isHoldingTransaction()) throw new PoolReentryError();
      const acquire = async () => {
        try {
          return await raw.connect();
        } catch (error) {
          if (error instanceof Error && /timeout exceeded when trying to connect/i.test(error.message)) {
            throw new PoolExhaustedError(options.acquireTimeoutMs);
          }
          throw error;
        }
      };
      // The wait for a connection, as a span of its own: a busy pool shows as a long one.
      if (!tracing.enabled) return acquire();
      return inSpan(
        'pool.connect',
        { attributes: { 'db.system.name': 'postgresql', 'db.client.connection.pool.name': options.applicationName } },
        acquire,
      );
    },
    end: () => raw.end(),
  };
  return { kyselyPool, raw };
}

function errorSummary(error: unknown): { message: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? { message: error.message, code } : { message: error.message };
  }
  return { message: String(error) };
}
