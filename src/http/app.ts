import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GraphQLSchema } from 'graphql';
import type { AppServices } from '../graphql/context.js';
import { schema } from '../graphql/schema.js';
import { createActionsHandler } from './actions.js';
import { createNodeDispatch } from './node-dispatch.js';
import { DrainState } from './node-server.js';
import { createRequestLog, requestIdOf } from './request-log.js';
import { createRouter } from './router.js';
import { graphiqlRoutes } from './routes/graphiql.js';
import { health, readiness } from './routes/health.js';
import { metricsRoute } from './routes/metrics.js';
import { getRoute } from './routes/route.js';
import { simulatedAuthenticationRoutes } from './routes/simulated-authentication.js';
import { stripeWebhookRoute } from './routes/stripe-webhook.js';
import { createServeFetch } from './serve-fetch.js';
import { createGraphQLServer, graphQLServerParts, knownDocumentPath, type GraphQLServer } from './yoga.js';

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

/**
 * The HTTP surface: /graphql and /actions, /health, /ready, /metrics and (in development)
 * GraphiQL. Every request, whichever path serves it (src/http/node-dispatch.ts from a socket,
 * src/http/serve-fetch.ts for the rest), gets one request id and one log line.
 */
export function createApp(services: AppServices): App {
  const { config, log } = services;
  const { maxBodyBytes } = config.server;
  const parts = graphQLServerParts(services);
  const yoga = createGraphQLServer(services, parts);
  const drain = new DrainState();
  const knownDocuments = knownDocumentPath(services, parts);
  const actions = createActionsHandler(yoga, schema, services, knownDocuments);
  const router = createRouter({
    routes: [
      getRoute('/health', health),
      getRoute('/ready', readiness({ database: services.health, drain })),
      getRoute('/metrics', metricsRoute(services.metrics, config.edge.metricsToken)),
      stripeWebhookRoute(services),
      ...simulatedAuthenticationRoutes(services),
      ...graphiqlRoutes(config),
    ],
    yoga,
    actions,
    maxBodyBytes,
  });
  const requestLog = createRequestLog(log, services.metrics);
  const serveFetch = createServeFetch(router, requestLog, log);
  return {
    yoga,
    schema,
    drain,
    fetch: (request) => serveFetch(request, new URL(request.url).pathname, requestIdOf(request.headers.get('x-request-id'))),
    acceptsBody: (req) => !(Number(req.headers['content-length'] ?? 0) > maxBodyBytes),
    handleNode: createNodeDispatch({
      yoga,
      serveFetch,
      requestLog,
      log,
      maxBodyBytes,
      actions,
      trustProxy: config.edge.trustProxy,
      knownDocuments,
    }),
  };
}
