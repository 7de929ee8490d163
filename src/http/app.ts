import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { sql } from 'kysely';
import { sqlStateOf } from '../db/sqlstate.js';
import type { AppServices, Context } from '../graphql/context.js';
import { AppError, ErrorCode } from '../errors.js';
import { toGraphQLError } from '../graphql/errors.js';
import { createTurns } from '../graphql/read.js';
import { schema as appSchema } from '../graphql/schema.js';
import { createActionsHandler } from './actions.js';
import { readLimitedBody, BodyTooLargeError } from './body.js';
import { currentRequestScope, runInRequestScope, type RequestScope } from '../request-scope.js';
import { bearerToken, resolveSession, secretMatches, sessionFromVariables } from '../identity/session.js';
import { graphiqlOptions } from './graphiql.js';
import { INVALID_OPERATION, isOriginalGraphQLError, useErrorContract, useIdempotencyKey, useRequestOutcome } from './plugins.js';
import { createGraphiQLPage, GRAPHIQL_PATH, wantsGraphiQLPage } from './graphiql-page.js';
import { toFetchRequest, writeFetchResponse } from './node-server.js';
import { useDocumentLimits } from './document-limits.js';
import { useAdmission } from './admission.js';
import { corsOptions, isGraphQLContentType, useVaryOnOrigin } from './edge.js';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { useTrustedDocuments } from './trusted-documents.js';
import { useWellFormedStrings } from './string-inputs.js';

/** What the /actions adapter hands to Yoga: the session from Hasura's body, already authenticated. */
export interface ServerContext {
  actionSessionVariables?: Record<string, unknown>;
}

export interface App {
  /** The whole HTTP surface as a Fetch handler: what tests call in process. */
  fetch(request: Request): Promise<Response>;
  /** The same surface on a Node socket. */
  handleNode(req: IncomingMessage, res: ServerResponse): void;
  yoga: YogaServerInstance<ServerContext, Context>;
  schema: GraphQLSchema;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const READY_TIMEOUT_MS = 1_000;

/** The caller's x-request-id when it is a sane token, else a new one. */
function requestIdOf(presented: string | string[] | null): string {
  return typeof presented === 'string' && REQUEST_ID.test(presented) ? presented : randomUUID();
}

export function createApp(services: AppServices): App {
  const { config, log } = services;

  const yoga = createYoga<ServerContext, Context>({
    schema: appSchema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // GraphiQL has a path of its own (see graphiql-page.ts).
    graphiql: false,
    // Yoga logs several debug lines per request: format them only when someone listens.
    logging: {
      debug: (...args) => log.isLevelEnabled('debug') && log.debug({ yoga: args.map(String) }, 'yoga'),
      info: (...args) => log.isLevelEnabled('info') && log.info({ yoga: args.map(String) }, 'yoga'),
      warn: (...args) => log.warn({ yoga: args.map(String) }, 'yoga'),
      error: (...args) => log.error({ yoga: args.map(String) }, 'yoga'),
    },
    maskedErrors: {
      maskError(error) {
        if (isOriginalGraphQLError(error)) return error;
        const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
        if (original instanceof AppError) return toGraphQLError(original, error instanceof GraphQLError ? error : undefined);
        const scope = currentRequestScope();
        if (scope) scope.sqlState = sqlStateOf(original) ?? undefined;
        log.error({ err: original, sqlState: sqlStateOf(original) ?? undefined }, 'unexpected error, masked for the client');
        return new GraphQLError('Internal server error', {
          ...(error instanceof GraphQLError ? { nodes: error.nodes ?? null, path: error.path ?? null } : {}),
          extensions: { code: ErrorCode.internal },
        });
      },
    },
    cors: corsOptions(config.edge.corsOrigins),
    plugins: [
      ...(config.edge.introspection ? [] : [useDisableIntrospection()]),
      ...(config.edge.trustedDocumentsPath ? [useTrustedDocuments(config, appSchema)] : []),
      useVaryOnOrigin(),
      useRequestOutcome(),
      useDocumentLimits({
        maxDepth: config.edge.maxQueryDepth,
        maxAliases: config.edge.maxAliases,
        maxTokens: config.edge.maxQueryTokens,
        maxCost: config.edge.maxQueryCost,
      }),
      useWellFormedStrings(),
      useIdempotencyKey(),
      useAdmission(services.admission),
      useErrorContract({ hideSuggestions: !config.edge.introspection }),
    ],
    context: async ({ request, actionSessionVariables }): Promise<Context> => {
      const scope = currentRequestScope();
      const session = actionSessionVariables
        ? sessionFromVariables(actionSessionVariables)
        : await resolveSession(request.headers, config, log);
      return {
        services,
        pool: services.pool,
        session,
        requestId: scope?.requestId ?? randomUUID(),
        deadline: Date.now() + config.requestDeadlineMs,
        signal: request.signal,
        turns: createTurns(),
        log,
        idempotencyKeyHeader: request.headers.get('idempotency-key'),
        idempotency: null,
      };
    },
  });

  const actions = createActionsHandler(yoga, appSchema, services);
  const graphiqlSettings = graphiqlOptions(config);
  // GraphiQL's code is served from this process, not from a CDN: it works offline and behind firewalls.
  const graphiql = graphiqlSettings ? createGraphiQLPage({ ...graphiqlSettings, endpoint: '/graphql' }) : null;

  async function ready(): Promise<Response> {
    try {
      await Promise.race([
        sql`select 1`.execute(services.pool),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS).unref()),
      ]);
      return Response.json({ status: 'ready' });
    } catch {
      return Response.json({ status: 'database unavailable' }, { status: 503 });
    }
  }

  async function metrics(request: Request): Promise<Response> {
    const { metricsToken } = config.edge;
    if (metricsToken !== null && !secretMatches(bearerToken(request.headers.get('authorization')), metricsToken)) {
      return Response.json({ message: '/metrics needs Authorization: Bearer <METRICS_TOKEN>' }, { status: 401, headers: { 'www-authenticate': 'Bearer' } });
    }
    return new Response(await services.metrics.scrape(), {
      headers: { 'content-type': services.metrics.registry.contentType },
    });
  }

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/health' && request.method === 'GET') return Response.json({ status: 'ok' });
    if (url.pathname === '/ready' && request.method === 'GET') return ready();
    if (url.pathname === '/metrics' && request.method === 'GET') return metrics(request);
    if (graphiql && url.pathname === GRAPHIQL_PATH && request.method === 'GET') return graphiql.serve(request);
    if (graphiql && url.pathname === '/graphql' && wantsGraphiQLPage(request.method, request.headers.get('accept'))) {
      return graphiql.redirect();
    }
    if (url.pathname !== '/graphql' && url.pathname !== '/actions') {
      return Response.json({ message: `No route for ${request.method} ${url.pathname}; GraphQL is at /graphql` }, { status: 404 });
    }
    // A form or a text/plain body is what a page of another origin can post without a preflight:
    // refusing them before anything runs keeps mutations out of reach of cross-site forms.
    if (request.method === 'POST' && !isGraphQLContentType(request.headers.get('content-type'))) {
      return Response.json(
        {
          message: 'POST bodies must be application/json (or application/graphql-response+json)',
          extensions: { code: ErrorCode.badUserInput },
        },
        { status: 415 },
      );
    }
    let buffered: Request;
    try {
      buffered = await readLimitedBody(request, config.maxBodyBytes);
    } catch (error) {
      if (error instanceof BodyTooLargeError) {
        // The rest of the body was never read: the connection cannot carry another request.
        return Response.json(
          { message: error.message, extensions: { code: ErrorCode.badUserInput } },
          { status: 413, headers: { connection: 'close' } },
        );
      }
      throw error;
    }
    return url.pathname === '/actions' ? actions(buffered) : yoga.fetch(buffered, {});
  }

  /** Runs `handle` as one request: its scope (request id in logs), a 500 for a crash, the log line. */
  async function withinRequest(method: string, path: string, requestId: string, handle: () => Promise<Response>) {
    const started = performance.now();
    const scope: RequestScope = { requestId };
    return runInRequestScope(scope, async () => {
      let response: Response;
      try {
        response = await handle();
      } catch (error) {
        log.error({ err: error }, 'request failed outside GraphQL');
        response = Response.json(
          { message: 'Internal server error', extensions: { code: ErrorCode.internal, requestId } },
          { status: 500 },
        );
      }
      response.headers.set('x-request-id', requestId);
      logCompleted(scope, method, path, response.status, started);
      return response;
    });
  }

  /** One line per request: what ran, how it ended, how long it took, how many attempts. No payloads. */
  function logCompleted(scope: RequestScope, method: string, path: string, status: number, started: number) {
    const { requestId, outcome, attempts, replayed, sqlState } = scope;
    const seconds = (performance.now() - started) / 1000;
    const isGraphQL = path === '/graphql' || path === '/actions';
    // A GraphQL request that never reached execution (parse error, a limit, a refused body) is
    // counted as `invalid`: the label set stays the schema's root fields and a few fixed words.
    const operation = scope.operation ?? (isGraphQL && method !== 'GET' && method !== 'OPTIONS' ? INVALID_OPERATION : undefined);
    if (operation) services.metrics.requests.observe({ operation, outcome: outcome ?? 'OK' }, seconds);
    log[isGraphQL ? 'info' : 'debug'](
      { requestId, operation, method, path, status, outcome, attempts, replayed, sqlState, durationMs: Math.round(seconds * 1000) },
      'request completed',
    );
  }

  return {
    yoga,
    schema: appSchema,
    fetch(request) {
      return withinRequest(request.method, new URL(request.url).pathname, requestIdOf(request.headers.get('x-request-id')), () =>
        route(request),
      );
    },
    handleNode(req, res) {
      const requestId = requestIdOf(req.headers['x-request-id'] ?? null);
      const path = (req.url ?? '/').split('?')[0]!;
      const declaredLength = Number(req.headers['content-length'] ?? 'NaN');
      // The hot path: GraphQL with a declared, acceptable length goes straight to Yoga's own Node
      // adapter (Node's parser holds the body to that length). Everything else (a browser asking
      // for GraphiQL, a body that is not JSON included) takes the Fetch path above, which buffers
      // and limits bodies of unknown length.
      const pageRequest = graphiql !== null && wantsGraphiQLPage(req.method ?? 'GET', req.headers.accept);
      const isJsonPost = req.method === 'POST' && declaredLength <= config.maxBodyBytes && isGraphQLContentType(req.headers['content-type'] ?? null);
      if (path === '/graphql' && !pageRequest && (req.method === 'GET' || isJsonPost)) {
        const started = performance.now();
        const scope: RequestScope = { requestId };
        res.setHeader('x-request-id', requestId);
        res.once('finish', () => logCompleted(scope, req.method ?? 'GET', path, res.statusCode, started));
        runInRequestScope(scope, () => void yoga.requestListener(req, res));
        return;
      }
      withinRequest(req.method ?? 'GET', path, requestId, () => route(toFetchRequest(req, res)))
        .then((response) => writeFetchResponse(response, res))
        .catch((error: unknown) => {
          log.error({ err: error }, 'could not write the response');
          res.destroy();
        });
    },
  };
}
