import { group, wholeNumber } from './kinds.js';

/** What start-up migrations may do to a database that serves traffic (docs/operations.md, "Migrations"). */
export const migrationVariables = group('Migrations at start-up', {
  lockTimeoutMs: wholeNumber({ name: 'MIGRATION_LOCK_TIMEOUT_MS', default: 200, min: 10, max: 600_000 }).describe(
    "`lock_timeout` of every migration statement: the longest requests queue behind a migration's lock ([migrations](#migrations-under-traffic))",
  ),
  statementTimeoutMs: wholeNumber({ name: 'MIGRATION_STATEMENT_TIMEOUT_MS', default: 600_000, min: 100, max: 86_400_000 }).describe(
    '`statement_timeout` of every migration statement',
  ),
  retryForMs: wholeNumber({ name: 'MIGRATION_RETRY_FOR_MS', default: 60_000, min: 0, max: 3_600_000 }).describe(
    'how long a migration whose locks timed out is tried again (full jitter) before start-up stops, naming the sessions it waited for',
  ),
  lockWaitMs: wholeNumber({ name: 'MIGRATION_LOCK_WAIT_MS', default: 60_000, min: 1, max: 3_600_000 }).describe(
    'how long start-up waits for another process that holds the migration lock',
  ),
});
