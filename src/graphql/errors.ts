import { GraphQLError } from 'graphql';

/** The public error codes of DESIGN §7. Anything else reaching a client is a bug. */
export const ErrorCode = {
  badUserInput: 'BAD_USER_INPUT',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  notFound: 'NOT_FOUND',
  idempotencyKeyReused: 'IDEMPOTENCY_KEY_REUSED',
  tryAgain: 'TRY_AGAIN',
  internal: 'INTERNAL_SERVER_ERROR',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** HTTP status of an error on /actions, where Hasura hides the message of any 5xx. */
export const actionStatusOf: Record<ErrorCode, number> = {
  BAD_USER_INPUT: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  IDEMPOTENCY_KEY_REUSED: 422,
  TRY_AGAIN: 409,
  INTERNAL_SERVER_ERROR: 500,
};

/**
 * An expected, client-facing error. Yoga passes GraphQLErrors through its masking untouched, so
 * only this class (never a database error) decides what a client reads.
 */
export class AppError extends GraphQLError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(message, { extensions: { ...details, code } });
    this.name = 'AppError';
  }
}

export const badInput = (message: string, field?: string) =>
  new AppError(ErrorCode.badUserInput, message, field === undefined ? {} : { field });
export const notFound = (what: string) => new AppError(ErrorCode.notFound, `${what} not found`);
export const unauthenticated = (message: string) => new AppError(ErrorCode.unauthenticated, message);
export const forbidden = (message: string) => new AppError(ErrorCode.forbidden, message);
export interface TryAgainDetails {
  /** What ran out: a SQLSTATE, 'pool', 'deadline', 'connection', 'shed'. */
  reason: string;
  /** When a resend has a fair chance, judged from the cause. */
  retryAfterMs: number;
  attempts?: number;
}

/**
 * TRY_AGAIN: safe to resend with the same Idempotency-Key. `extensions.retryAfterMs` says when;
 * Yoga turns `extensions.http.headers` into the response's Retry-After header (whole seconds)
 * and leaves `http` out of the body.
 */
export function tryAgain(message: string, details: TryAgainDetails): AppError {
  const retryAfterMs = Math.max(1, Math.round(details.retryAfterMs));
  return new AppError(ErrorCode.tryAgain, message, {
    ...details,
    retryAfterMs,
    http: { headers: { 'Retry-After': String(retryAfterSeconds(retryAfterMs)) } },
  });
}

/** Retry-After carries whole seconds; anything sooner than a second is 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.values(ErrorCode).includes(value as ErrorCode);
}
