/**
 * The errors a client may read, independent of how they travel: the GraphQL layer turns an
 * AppError into a GraphQLError with `extensions.code`, the HTTP layer picks statuses and headers
 * (src/http/error-status.ts). Any other error reaching a client is a bug and is masked.
 */

/** The public error codes (docs/design.md §7). */
export const ErrorCode = {
  badUserInput: 'BAD_USER_INPUT',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  notFound: 'NOT_FOUND',
  idempotencyKeyReused: 'IDEMPOTENCY_KEY_REUSED',
  tryAgain: 'TRY_AGAIN',
  paymentsUnavailable: 'PAYMENTS_UNAVAILABLE',
  internal: 'INTERNAL_SERVER_ERROR',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * An expected, client-facing error. `extensions` is what a client reads beside the message;
 * graphql-js copies it onto the GraphQLError that wraps an error thrown in a resolver.
 */
export class AppError extends Error {
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.extensions = { ...details, code };
  }
}

export interface TryAgainDetails {
  /**
   * What ran out: a SQLSTATE, 'pool' (every connection busy), 'connect' (no new connection in
   * time), 'unanswered' (a statement's client-side limit), 'unavailable' (every database host
   * failing), 'deadline', 'connection', 'shed', 'busy', 'cancelled', 'jwks'.
   */
  reason: string;
  /** When a resend has a fair chance, judged from the cause. */
  retryAfterMs: number;
  /** Transaction attempts made before giving up. */
  attempts?: number;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** TRY_AGAIN: safe to resend with the same Idempotency-Key, after `retryAfterMs`. */
export class TryAgainError extends AppError {
  readonly reason: string;
  readonly retryAfterMs: number;
  readonly attempts: number | undefined;

  constructor(message: string, details: TryAgainDetails) {
    const retryAfterMs = Math.max(1, Math.round(details.retryAfterMs));
    super(ErrorCode.tryAgain, message, { ...details, retryAfterMs });
    this.name = 'TryAgainError';
    this.reason = details.reason;
    this.retryAfterMs = retryAfterMs;
    this.attempts = details.attempts;
  }

  /** The SQLSTATE that ended the last attempt, when the database's answer was the cause. */
  get sqlState(): string | null {
    return SQLSTATE.test(this.reason) ? this.reason : null;
  }
}

export const badInput = (message: string, field?: string) =>
  new AppError(ErrorCode.badUserInput, message, field === undefined ? {} : { field });
export const notFound = (what: string) => new AppError(ErrorCode.notFound, `${what} not found`);
export const unauthenticated = (message: string) => new AppError(ErrorCode.unauthenticated, message);
export const forbidden = (message: string) => new AppError(ErrorCode.forbidden, message);
export const tryAgain = (message: string, details: TryAgainDetails) => new TryAgainError(message, details);

/** A turn that did not come back met a full line or the deadline: a second later is a fair guess. */
const AFTER_LOST_TURN_MS = 1_000;

/** An operation that gave its admission turn back and got none back: it sends nothing more, and may be sent again. */
export const turnNotBack = () =>
  tryAgain('The server was too busy to give this operation its turn back; resend the request', {
    reason: 'busy',
    retryAfterMs: AFTER_LOST_TURN_MS,
  });

/** Checkout on a server with no payment provider (production without STRIPE_SECRET_KEY): nothing was written. */
export const paymentsUnavailable = () =>
  new AppError(
    ErrorCode.paymentsUnavailable,
    'Checkout is not available: this server has no payment provider configured (STRIPE_SECRET_KEY). Nothing was written and nobody was charged',
  );

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.values(ErrorCode).includes(value as ErrorCode);
}
