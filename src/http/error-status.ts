import { ErrorCode } from '../core/errors.js';

/** HTTP status of an error on /actions, where Hasura hides the message of any 5xx. */
export const actionStatusOf: Record<ErrorCode, number> = {
  BAD_USER_INPUT: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  IDEMPOTENCY_KEY_REUSED: 422,
  TRY_AGAIN: 409,
  // A 4xx, so that Hasura passes the message on: the server is missing its configuration, and resending will not help.
  PAYMENTS_UNAVAILABLE: 422,
  INTERNAL_SERVER_ERROR: 500,
};

/** Retry-After carries whole seconds; anything sooner than a second is 1. */
function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

/** The Retry-After header a TRY_AGAIN with `extensions.retryAfterMs` asks for, if any. */
export function retryAfterHeader(extensions: Readonly<Record<string, unknown>>): string | null {
  const ms = extensions['retryAfterMs'];
  return extensions['code'] === ErrorCode.tryAgain && typeof ms === 'number' ? String(retryAfterSeconds(ms)) : null;
}
