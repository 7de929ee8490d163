/** SQLSTATE codes the application reacts to (PostgreSQL Appendix A). */
export const SqlState = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  checkViolation: '23514',
  duplicateTable: '42P07',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  lockNotAvailable: '55P03',
  queryCanceled: '57014',
  adminShutdown: '57P01',
  crashShutdown: '57P02',
  cannotConnectNow: '57P03',
  idleInTransactionTimeout: '25P03',
  activeSqlTransaction: '25001',
  readOnlyTransaction: '25006',
  diskFull: '53100',
  outOfMemory: '53200',
  tooManyConnections: '53300',
  invalidParameterValue: '22023',
} as const;

/**
 * Class 53 (insufficient resources) and class 58 (system errors: I/O, a file gone) by code, each
 * with what ran out in words a client can act on. A code of these classes not listed here is
 * answered by its class's words.
 */
const RESOURCE_SHORTAGES: Readonly<Record<string, string>> = {
  '53000': 'the database ran out of a resource',
  '53100': 'the database is out of disk space',
  '53200': 'the database is out of memory',
  '53300': 'the database has no connection slot left (max_connections)',
  '53400': 'the database reached a configured limit',
  '58000': 'the database met a system error',
  '58030': 'the database met an I/O error',
  '58P01': 'the database could not find a file it needs',
  '58P02': 'the database met a file that should not exist',
  '58P03': 'the database met a file name too long',
};

export function sqlStateOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * The database could not do the work for want of resources (class 53: disk, memory, connection
 * slots, a configured limit) or met a system error (class 58: I/O). Nothing is wrong with the
 * request: the same request succeeds once the database has the resource again, so it is TRY_AGAIN.
 */
export function isResourceShortage(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state !== null && (state.startsWith('53') || state.startsWith('58'));
}

/** What ran out, for a client to read: the code's words, else its class's. */
export function resourceShortageWords(state: string): string {
  return RESOURCE_SHORTAGES[state] ?? (state.startsWith('53') ? RESOURCE_SHORTAGES['53000']! : RESOURCE_SHORTAGES['58000']!);
}

/**
 * A shortage that stops this server's writes where they run (disk, memory, I/O): every class-53 and
 * class-58 code but 53300, which refuses only a new connection, while those already open still serve.
 */
export function stopsWrites(state: string): boolean {
  return (state.startsWith('53') || state.startsWith('58')) && state !== SqlState.tooManyConnections;
}

/** Contention that a fresh attempt of the whole unit of work can clear (docs/design.md §5). */
export function isRetryableContention(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state === SqlState.serializationFailure || state === SqlState.deadlockDetected || state === SqlState.lockNotAvailable;
}

/**
 * The database went away or refused us: a restart, a terminated backend, a dropped socket.
 * The outcome of an in-flight COMMIT is unknown, so these are answered TRY_AGAIN, not retried here;
 * a resend with the same Idempotency-Key is what makes the retry safe.
 */
export function isConnectionFailure(error: unknown): boolean {
  const state = sqlStateOf(error);
  if (state !== null) {
    return (
      state.startsWith('08') ||
      state === SqlState.adminShutdown ||
      state === SqlState.crashShutdown ||
      state === SqlState.cannotConnectNow ||
      state === SqlState.idleInTransactionTimeout
    );
  }
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE' || code === 'ETIMEDOUT') return true;
  return /Connection terminated|connection is not queryable|Client has encountered a connection error|not queryable/i.test(error.message);
}
