import { ErrorCode } from '../core/errors.js';
import { currentRequestScope } from '../core/request-scope.js';

/** The status nginx logs for a client that hung up first; no client ever receives it. */
export const CLIENT_CLOSED_REQUEST = 499;

/** A body read that failed because the socket went away. */
export function isClientGone(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || message === 'aborted';
}

/**
 * A refusal before GraphQL runs, with its code and the request id: on /graphql a GraphQL
 * response (`{"errors": [...]}`, what a GraphQL client reads), elsewhere Hasura's
 * `{message, extensions}` (what /actions answers).
 */
export function refusalBody(path: string, message: string, extensions: Record<string, unknown>): string {
  const error = { message, extensions };
  return JSON.stringify(path === '/graphql' ? { errors: [error] } : error);
}

/** A refusal of the client's request as a Fetch Response; `limit` names the setting it ran into. */
export function refusal(path: string, message: string, status: number, headers: Record<string, string> = {}, limit?: string): Response {
  return new Response(
    refusalBody(path, message, {
      code: ErrorCode.badUserInput,
      ...(limit ? { limit } : {}),
      requestId: currentRequestScope()?.requestId,
    }),
    { status, headers: { 'content-type': 'application/json', ...headers } },
  );
}

/** A crash outside GraphQL: a bug of this server, nothing of its cause for the client. */
export function internalError(requestId: string): Response {
  return Response.json({ message: 'Internal server error', extensions: { code: ErrorCode.internal, requestId } }, { status: 500 });
}
