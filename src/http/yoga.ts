import { randomUUID } from 'node:crypto';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import type { AppServices, Context } from '../graphql/context.js';
import { createTurns } from '../graphql/read.js';
import { schema } from '../graphql/schema.js';
import { resolveSession, sessionFromVariables } from '../identity/session.js';
import { currentRequestScope } from '../request-scope.js';
import { useAdmission } from './plugins/admission.js';
import { corsOptions, useVaryOnOrigin } from './plugins/cors.js';
import { useDocumentLimits } from './plugins/document-limits.js';
import { clientErrorCode, maskUnexpected, useErrorContract } from './plugins/error-contract.js';
import { useIdempotencyKey } from './plugins/idempotency-key.js';
import { useRequestOutcome } from './plugins/request-outcome.js';
import { useWellFormedStrings } from './plugins/string-inputs.js';
import { useOperationSpans } from './plugins/tracing.js';
import { useTrustedDocuments } from './plugins/trusted-documents.js';

/** What the /actions adapter hands to Yoga: the session from Hasura's body, already authenticated. */
export interface ServerContext {
  actionSessionVariables?: Record<string, unknown>;
}

export type GraphQLServer = YogaServerInstance<ServerContext, Context>;

/** One GraphQL context per request: the session, the deadline, the client's signal, the root pool. */
function contextFactory(services: AppServices) {
  const { config, log } = services;
  return async ({ request, actionSessionVariables }: ServerContext & { request: Request }): Promise<Context> => {
    const scope = currentRequestScope();
    const session = actionSessionVariables
      ? sessionFromVariables(actionSessionVariables)
      : await resolveSession(request.headers, config, log);
    const deadline = Date.now() + config.requestDeadlineMs;
    // Every database call the request makes, through the runners or not, is limited by this (src/db/scope.ts).
    if (scope) scope.deadline = deadline;
    return {
      services,
      pool: services.pool,
      session,
      requestId: scope?.requestId ?? randomUUID(),
      deadline,
      signal: request.signal,
      turns: createTurns(),
      log,
      idempotencyKeyHeader: request.headers.get('idempotency-key'),
      idempotency: null,
    };
  };
}

/**
 * Yoga with the project's plugins, in the order they act on an operation: the edge's refusals
 * first (trusted documents, limits, strings, the key), then a turn (admission), then the error
 * contract on whatever comes out.
 */
export function createGraphQLServer(services: AppServices): GraphQLServer {
  const { config, log } = services;
  const { edge } = config;
  return createYoga<ServerContext, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // GraphiQL has a path of its own (see graphiql-page.ts).
    graphiql: false,
    // Yoga logs several debug lines per request: format them only when someone listens.
    logging: {
      debug: (...args) => log.isLevelEnabled('debug') && log.debug({ yoga: args.map(String) }, 'yoga'),
      info: (...args) => log.isLevelEnabled('info') && log.info({ yoga: args.map(String) }, 'yoga'),
      warn: (...args) => log.warn({ yoga: args.map(String) }, 'yoga'),
      // A client's mistake (a refused argument, a wrong secret) is the client's: its code is in the
      // request's log line already, so it is no error of the server's and its text is not kept.
      error: (...args) =>
        args.every((error) => clientErrorCode(error) !== null)
          ? log.isLevelEnabled('debug') && log.debug({ codes: args.map(clientErrorCode) }, 'client error')
          : log.error({ yoga: args.map(String) }, 'yoga'),
    },
    maskedErrors: { maskError: maskUnexpected(log) },
    cors: corsOptions(edge.corsOrigins),
    plugins: [
      ...(edge.introspection ? [] : [useDisableIntrospection()]),
      ...(edge.trustedDocumentsPath ? [useTrustedDocuments(config, schema)] : []),
      useVaryOnOrigin(),
      useRequestOutcome(),
      useOperationSpans(),
      useDocumentLimits({
        maxDepth: edge.maxQueryDepth,
        maxAliases: edge.maxAliases,
        maxTokens: edge.maxQueryTokens,
        maxCost: edge.maxQueryCost,
      }),
      useWellFormedStrings(),
      useIdempotencyKey(),
      useAdmission(services.admission),
      useErrorContract({ hideSuggestions: !edge.introspection }),
    ],
    context: contextFactory(services),
  });
}
