import type { Logger } from '../core/logger.js';
import { CLIENT_CLOSED_REQUEST, internalError, isClientGone } from './refusals.js';
import type { RequestLog } from './request-log.js';
import type { Router } from './router.js';

/** One request on the Fetch path, for its id and (from a socket) its client's address. */
export type ServeFetch = (request: Request, path: string, requestId: string, clientAddress?: string) => Promise<Response>;

/** The Fetch path's lifecycle: the request log around the router, a 500 for a crash outside GraphQL, the request id on the response. */
export function createServeFetch(router: Router, requestLog: RequestLog, log: Logger): ServeFetch {
  return (request, path, requestId, clientAddress) => {
    const header = (name: string) => request.headers.get(name) ?? undefined;
    const line = { method: request.method, path, requestId, header, ...(clientAddress === undefined ? {} : { clientAddress }) };
    return requestLog.begin(line, async (finish, traceparent, report) => {
      let response: Response;
      try {
        response = await router(request, report);
      } catch (error) {
        if (request.signal.aborted || isClientGone(error)) {
          // Nobody is left to answer: a client that hung up mid-body, or one timed out by Node.
          log.info('the client left before its request was read');
          response = new Response(null, { status: CLIENT_CLOSED_REQUEST });
          finish(response.status);
          return response;
        }
        log.error({ err: error }, 'request failed outside GraphQL');
        response = internalError(requestId);
      }
      response.headers.set('x-request-id', requestId);
      if (traceparent) response.headers.set('traceparent', traceparent);
      finish(response.status);
      return response;
    });
  };
}
