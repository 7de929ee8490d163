import type { RequestReport } from '../graphql/context.js';
import type { ActionsHandler } from './actions.js';
import { responseOf } from './answer.js';
import { BodyTooLargeError, isGraphQLContentType, readLimitedBody } from './body.js';
import { refusal } from './refusals.js';
import type { Route } from './routes/route.js';
import { PLAIN_CONTEXT_PART, type GraphQLServer } from './yoga.js';

export interface RouterParts {
  /** Tried in order before GraphQL: health, readiness, metrics, GraphiQL. */
  routes: Route[];
  yoga: GraphQLServer;
  actions: ActionsHandler;
  maxBodyBytes: number;
}

/** The Fetch path: `report` is the request log's, handed to Yoga. */
export type Router = (request: Request, report: RequestReport) => Promise<Response>;

const notJson = (path: string) => refusal(path, 'POST bodies must be application/json (or application/graphql-response+json)', 415);

export function createRouter(parts: RouterParts): Router {
  const { routes, yoga, actions, maxBodyBytes } = parts;
  return async (request, report) => {
    const url = new URL(request.url);
    const route = routes.find((candidate) => candidate.matches(request.method, url.pathname, request));
    if (route) return route.serve(request);
    if (url.pathname !== '/graphql' && url.pathname !== '/actions') {
      return Response.json({ message: `No route for ${request.method} ${url.pathname}; GraphQL is at /graphql` }, { status: 404 });
    }
    // A form or a text/plain body is what a page of another origin can post without a preflight:
    // refusing them before anything runs keeps mutations out of reach of cross-site forms.
    if (request.method === 'POST' && !isGraphQLContentType(request.headers.get('content-type'))) return notJson(url.pathname);
    let buffered: Request;
    try {
      buffered = await readLimitedBody(request, maxBodyBytes);
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) throw error;
      // The rest of the body was never read: the connection cannot carry another request.
      return refusal(url.pathname, error.message, 413, { connection: 'close' }, 'MAX_BODY_BYTES');
    }
    if (url.pathname === '/actions') return responseOf(await actions(buffered, report));
    // Media types are case-insensitive; Yoga compares them as written.
    const contentType = buffered.headers.get('content-type');
    if (contentType !== null) buffered.headers.set('content-type', contentType.toLowerCase());
    return yoga.fetch(buffered, { report }, PLAIN_CONTEXT_PART);
  };
}
