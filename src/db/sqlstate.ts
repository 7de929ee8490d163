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
  readOnlyTransaction: '25006',
} as const;

export function sqlStateOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
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
