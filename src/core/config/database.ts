import { z } from 'zod';
import { DatabaseUrlError, parseDatabaseUrl } from '../database-url.js';
import { custom, flag, group, refuse, wholeNumber } from './kinds.js';

/** A connection string of one of the forms src/core/database-url.ts reads. */
const databaseUrl = z.string().transform((raw, ctx) => {
  try {
    parseDatabaseUrl(raw);
  } catch (error) {
    if (error instanceof DatabaseUrlError) return refuse(ctx, error.message);
    throw error;
  }
  return raw;
});

/** The database: where it is, the pool that reaches it, and the limits every transaction runs under. */
export const databaseVariables = group('The database', {
  // Unset is the embedded PostgreSQL: refused outside development (src/core/config.ts).
  url: custom({ name: 'DATABASE_URL', shown: '(embedded)', accepts: '`postgres://…` URL', schema: databaseUrl }).describe(
    "`postgres://…` of an existing server, or libpq's multi-host form `postgres://u:p@db1:5432,db2:5432/app?target_session_attrs=read-write` " +
      '(`any`, `read-write` or `primary`: [failover](#failover-patroni-haproxy)); when unset an embedded PostgreSQL runs with data in `.data/` ' +
      '(development and tests only: required whenever `NODE_ENV` is not unset, `development` or `test`)',
  ),
  connectTimeoutMs: wholeNumber({ name: 'DB_CONNECT_TIMEOUT_MS', default: 30_000, min: 0, max: 3_600_000 }).describe(
    'how long start-up keeps trying to reach `DATABASE_URL` (one log line per attempt) before it stops',
  ),
  healthCheckIntervalMs: wholeNumber({ name: 'DB_HEALTH_CHECK_INTERVAL_MS', default: 2_000, min: 100, max: 600_000 }).describe(
    'how often the server checks its database over a connection of its own (sooner when a connection stalls or a host fails); ' +
      '`/ready` answers from the last check; while it fails, a log line each time, and one when it is back',
  ),
  poolMax: wholeNumber({ name: 'DB_POOL_MAX', default: 10, min: 1, max: 1000 }).describe('connections in the pool'),
  poolAcquireTimeoutMs: wholeNumber({ name: 'DB_POOL_ACQUIRE_TIMEOUT_MS', default: 3_000, min: 1, max: 600_000 }).describe(
    'wait for a free connection while every one is busy (and for an operation\'s turn) before answering `TRY_AGAIN` ("every connection was busy")',
  ),
  poolConnectTimeoutMs: wholeNumber({ name: 'DB_POOL_CONNECT_TIMEOUT_MS', default: 3_000, min: 100, max: 600_000 }).describe(
    'how long one new connection to one host may take (TCP, TLS, authentication, the `target_session_attrs` check) ' +
      'before the next host is tried or the request answers `TRY_AGAIN` naming this variable',
  ),
  preparedStatements: flag({ name: 'DB_PREPARED_STATEMENTS', default: true }).describe(
    'run the hot statements as named prepared statements (parsed and planned once per connection); `false` behind a pooler in ' +
      'transaction mode that does not keep them (PgBouncer before 1.21, or later without `max_prepared_statements`)',
  ),
  lockTimeoutMs: wholeNumber({ name: 'LOCK_TIMEOUT_MS', default: 2_000, min: 1, max: 600_000 }).describe(
    '`lock_timeout` of every transaction',
  ),
  statementTimeoutMs: wholeNumber({ name: 'STATEMENT_TIMEOUT_MS', default: 5_000, min: 10, max: 600_000 }).describe(
    '`statement_timeout` of every transaction',
  ),
  idleInTransactionTimeoutMs: wholeNumber({ name: 'IDLE_IN_TRANSACTION_TIMEOUT_MS', default: 10_000, min: 100, max: 600_000 }).describe(
    '`idle_in_transaction_session_timeout` of every transaction',
  ),
});
