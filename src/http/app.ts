import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GraphQLSchema } from 'graphql';
import proxyaddr from 'proxy-addr';
import { ErrorCode } from '../errors.js';
import { currentRequestScope } from '../request-scope.js';
import type { AppServices, RequestReport } from '../graphql/context.js';
import { schema } from '../graphql/schema.js';
import { createActionsHandler } from './actions.js';
import { BodyTooLargeError, isGraphQLContentType, readLimitedBody } from './body.js';
import { graphiqlOptions } from './graphiql.js';
import { createGraphiQLPage, wantsGraphiQLPage } from './graphiql-page.js';
import {
  clientLeftSignal,
  DrainState,
  MAX_REQUEST_HEADERS,
  readDeclaredBody,
  requestUrlOf,
  toFetchRequest,
  writeFetchResponse,
} from './node-server.js';
import { createRequestLog, requestIdOf } from './request-log.js';
import { health, readiness } from './routes/health.js';
import { metricsRoute } from './routes/metrics.js';
import { createGraphQLServer, type GraphQLServer } from './yoga.js';

export interface App {
  /** The whole HTTP surface as a Fetch handler: what tests call in process. */
  fetch(request: Request): Promise<Response>;
  /** The same surface on a Node socket. */
  handleNode(req: IncomingMessage, res: ServerResponse): void;
  /** Set by the server that drains this app: /ready then fails. */
  drain: DrainState;
  /** Whether a request's declared body is one the server would read (for `Expect: 100-continue`). */
  acceptsBody(req: IncomingMessage): boolean;
  yoga: GraphQLServer;
  schema: GraphQLSchema;
}

/** Methods a Fetch Request cannot carry (the Fetch standard forbids them). */
const NOT_FETCH_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);

/** The status nginx logs for a client that hung up first; no client ever receives it. */
const CLIENT_CLOSED_REQUEST = 499;

/** A body read that failed because the socket went away. */
function isClientGone(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || message === 'aborted';
}

/**
 * The client's address: the socket's peer, or, when TRUST_PROXY believes the peer, the address
 * its X-Forwarded-For names (the nearest hop no trusted proxy vouches for).
 */
function clientAddresses(trustProxy: string[]): (req: IncomingMessage) => string {
  if (trustProxy.length === 0) return (req) => req.socket.remoteAddress ?? 'unknown';
  const trust = proxyaddr.compile(trustProxy);
  return (req) => proxyaddr(req, trust);
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

const refusal = (path: string, message: string, status: number, headers: Record<string, string> = {}, limit?: string) =>
  new Response(
    refusalBody(path, message, {
      code: ErrorCode.badUserInput,
      ...(limit ? { limit } : {}),
      requestId: currentRequestScope()?.requestId,
    }),
    { status, headers: { 'content-type': 'application/json', ...headers } },
  );

/** A crash outside GraphQL: a bug of this server, nothing of its cause for the client. */
const internalError = (requestId: string) =>
  Response.json({ message: 'Internal server error', extensions: { code: ErrorCode.internal, requestId } }, { status: 500 });

const notJson = (path: string) => refusal(path, 'POST bodies must be application/json (or application/graphql-response+json)', 415);

/** Whether the URL every Node path builds from the request line and Host parses. */
const requestUrlParses = (req: IncomingMessage) => URL.canParse(requestUrlOf(req));

/**
 * The HTTP surface: /graphql and /actions, /health, /ready, /metrics and (in development)
 * GraphiQL. Every request, whichever path serves it, gets one request id and one log line.
 */
export function createApp(services: AppServices): App {
  const { config, log } = services;
  const yoga = createGraphQLServer(services);
  const actions = createActionsHandler(yoga, schema, services);
  const graphiqlSettings = graphiqlOptions(config);
  // GraphiQL's code is served from this process, not from a CDN: it works offline and behind firewalls.
  const graphiql = graphiqlSettings ? createGraphiQLPage({ ...graphiqlSettings, endpoint: '/graphql' }) : null;
  const drain = new DrainState();
  const ready = readiness({ database: services.health, drain });
  const metrics = metricsRoute(services.metrics, config.edge.metricsToken);
  const requestLog = createRequestLog(log, services.metrics);
  const clientAddressOf = clientAddresses(config.edge.trustProxy);

  /** `report`: the request log's, handed to Yoga. `actionBody`: the body of an /actions request that the Node path has already read. */
  async function route(request: Request, report: RequestReport, actionBody?: string): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/health' && request.method === 'GET') return health();
    if (url.pathname === '/ready' && request.method === 'GET') return ready();
    if (url.pathname === '/metrics' && request.method === 'GET') return metrics(request);
    if (graphiql?.serves(url.pathname) && (request.method === 'GET' || request.method === 'HEAD')) return graphiql.serve(request);
    if (url.pathname === '/graphql' && wantsGraphiQLPage(request.method, request.headers.get('accept'))) {
      if (graphiql) return graphiql.redirect();
      return new Response('GraphiQL is served in development only. GraphQL itself answers POST /graphql with a JSON body.\n', {
        status: 406,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
    }
    if (url.pathname !== '/graphql' && url.pathname !== '/actions') {
      return Response.json({ message: `No route for ${request.method} ${url.pathname}; GraphQL is at /graphql` }, { status: 404 });
    }
    // A form or a text/plain body is what a page of another origin can post without a preflight:
    // refusing them before anything runs keeps mutations out of reach of cross-site forms.
    if (request.method === 'POST' && !isGraphQLContentType(request.headers.get('content-type'))) return notJson(url.pathname);
    if (actionBody !== undefined && url.pathname === '/actions') return actions(request, report, actionBody);
    let buffered: Request;
    try {
      buffered = await readLimitedBody(request, config.server.maxBodyBytes);
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) throw error;
      // The rest of the body was never read: the connection cannot carry another request.
      return refusal(url.pathname, error.message, 413, { connection: 'close' }, 'MAX_BODY_BYTES');
    }
    if (url.pathname === '/actions') return actions(buffered, report);
    // Media types are case-insensitive; Yoga compares them as written.
    const contentType = buffered.headers.get('content-type');
    if (contentType !== null) buffered.headers.set('content-type', contentType.toLowerCase());
    return yoga.fetch(buffered, { report });
  }

  /**
   * The hot path's answer: Yoga on a request of its own Fetch implementation (Node's headers as
   * they are, the body as text, a signal for the client leaving), the response in one write.
   */
  async function answerFromYoga(
    req: IncomingMessage,
    res: ServerResponse,
    body: string | null,
    requestId: string,
    report: RequestReport,
  ): Promise<void> {
    // Yoga's Fetch implementation reads Node's header object as it is (what its own Node adapter hands it).
    const headers = req.headers as Record<string, string>;
    const request = new yoga.fetchAPI.Request(requestUrlOf(req), { method: req.method, headers, body, signal: clientLeftSignal(res) });
    let response: Response;
    try {
      response = await yoga.handleRequest(request, { report });
    } catch (error) {
      log.error({ err: error }, 'request failed outside GraphQL');
      response = internalError(requestId);
    }
    await writeFetchResponse(response, res);
  }

  /** The Fetch path: routing, a 500 for a crash outside GraphQL, the request id on the response. */
  function serveFetch(request: Request, path: string, requestId: string, clientAddress?: string, actionBody?: string): Promise<Response> {
    const header = (name: string) => request.headers.get(name) ?? undefined;
    const line = { method: request.method, path, requestId, header, ...(clientAddress === undefined ? {} : { clientAddress }) };
    return requestLog.begin(line, async (finish, traceparent, report) => {
      let response: Response;
      try {
        response = await route(request, report, actionBody);
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
  }

  return {
    yoga,
    schema,
    drain,
    fetch: (request) => serveFetch(request, new URL(request.url).pathname, requestIdOf(request.headers.get('x-request-id'))),
    acceptsBody: (req) => !(Number(req.headers['content-length'] ?? 0) > config.server.maxBodyBytes),
    handleNode(req, res) {
      const requestId = requestIdOf(req.headers['x-request-id']);
      const clientAddress = clientAddressOf(req);
      const path = (req.url ?? '/').split('?')[0]!;
      const method = req.method ?? 'GET';
      const header = (name: string) => {
        const value = req.headers[name];
        return Array.isArray(value) ? value[0] : value;
      };
      /** Answers at once on the socket, before anything else reads the request. */
      const refuse = (status: number, message: string, headers: Record<string, string> = {}) =>
        requestLog.begin({ method, path, requestId, clientAddress, header }, (finish) => {
          res.writeHead(status, { ...headers, 'content-type': 'application/json', 'x-request-id': requestId });
          res.end(refusalBody(path, message, { code: ErrorCode.badUserInput, requestId }));
          finish(status);
        });
      // Node keeps the first MAX_REQUEST_HEADERS headers and drops the rest unseen: a session
      // header past the cut would be judged by its absence. Nothing of such a request is read.
      if (req.rawHeaders.length >= 2 * MAX_REQUEST_HEADERS) {
        log.debug({ requestId, headers: req.rawHeaders.length / 2 }, 'refused a request with too many headers');
        return refuse(431, `A request may carry fewer than ${MAX_REQUEST_HEADERS} headers`, { connection: 'close' });
      }
      // A Host that is not an authority (x:99999, [::1, ex ample) or a target the URL parser
      // refuses is the client's mistake: 400, never a crash with a stack.
      if (!requestUrlParses(req)) {
        log.debug({ requestId }, 'refused a request whose Host or target is not a valid URL');
        return refuse(400, 'The Host header and the request target must form a valid URL', { connection: 'close' });
      }
      if (NOT_FETCH_METHODS.has(method)) return refuse(405, `${method} is not served here`, { allow: 'GET, POST, OPTIONS' });
      const declaredLength = Number(req.headers['content-length'] ?? 'NaN');
      // The hot path: GraphQL with a declared, acceptable length (Node's parser holds the body to
      // it) is read straight off the socket and handed to Yoga as a request of its own Fetch
      // implementation with the body as text: no stream is piped and no size is checked a second
      // time. Everything else (a browser asking for GraphiQL, a body that is not JSON included)
      // takes the Fetch path, which buffers and limits bodies of unknown length.
      const pageRequest = wantsGraphiQLPage(method, req.headers.accept);
      const isJsonPost =
        method === 'POST' && declaredLength <= config.server.maxBodyBytes && isGraphQLContentType(req.headers['content-type'] ?? null);
      if (path === '/graphql' && !pageRequest && (method === 'GET' || isJsonPost)) {
        // Media types are case-insensitive; Yoga compares them as written.
        if (isJsonPost) req.headers['content-type'] = req.headers['content-type']!.toLowerCase();
        requestLog.begin({ method, path, requestId, clientAddress, header }, (finish, traceparent, report) => {
          res.setHeader('x-request-id', requestId);
          if (traceparent) res.setHeader('traceparent', traceparent);
          res.once('finish', () => finish(res.statusCode));
          (isJsonPost ? readDeclaredBody(req) : Promise.resolve(null))
            .then(
              (body) => answerFromYoga(req, res, body, requestId, report),
              () => undefined, // the client left before its body arrived: nobody to answer
            )
            .catch((error: unknown) => {
              log.error({ err: error }, 'could not write the response');
              res.destroy();
            });
        });
        return;
      }
      // Hasura's action calls: a declared, acceptable length is read straight off the socket, so
      // the body is not piped through a web stream and buffered a second time.
      const served =
        path === '/actions' && isJsonPost
          ? readDeclaredBody(req).then(
              (body) => serveFetch(toFetchRequest(req, res, false), path, requestId, clientAddress, body),
              () => null, // the client left before its body arrived: nobody to answer
            )
          : serveFetch(toFetchRequest(req, res), path, requestId, clientAddress);
      served
        .then((response) => response && writeFetchResponse(response, res))
        .catch((error: unknown) => {
          log.error({ err: error }, 'could not write the response');
          res.destroy();
        });
    },
  };
}
