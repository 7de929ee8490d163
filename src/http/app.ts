import { randomUUID } from 'node:crypto';
import { GraphQLError, type DocumentNode, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import { sql } from 'kysely';
import type { AppServices, Context } from '../graphql/context.js';
import { ErrorCode, isErrorCode } from '../graphql/errors.js';
import { schema as appSchema } from '../graphql/schema.js';
import { createActionsHandler } from './actions.js';
import { readLimitedBody, BodyTooLargeError } from './body.js';
import { currentRequestScope, runInRequestScope } from './request-scope.js';
import { resolveSession, sessionFromVariables } from './session.js';
import { graphiqlOptions } from './graphiql.js';

/** What the /actions adapter hands to Yoga: the session from Hasura's body, already authenticated. */
export interface ServerContext {
  actionSessionVariables?: Record<string, unknown>;
}

export interface App {
  fetch(request: Request): Promise<Response>;
  yoga: YogaServerInstance<ServerContext, Context>;
  schema: GraphQLSchema;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const READY_TIMEOUT_MS = 1_000;

function requestIdOf(request: Request): string {
  const presented = request.headers.get('x-request-id');
  return presented !== null && REQUEST_ID.test(presented) ? presented : randomUUID();
}

function isOriginalGraphQLError(error: unknown): error is GraphQLError {
  if (!(error instanceof GraphQLError)) return false;
  return error.originalError === undefined || error.originalError === null || error.originalError instanceof GraphQLError;
}

/**
 * Every error a client reads has one of the codes of DESIGN §7 and the request id. Parse,
 * validation and variable coercion errors are the client's mistakes: BAD_USER_INPUT.
 */
function withErrorContract(error: GraphQLError, requestId: string): GraphQLError {
  const original = error.extensions['code'];
  const code = isErrorCode(original) ? original : ErrorCode.badUserInput;
  return new GraphQLError(error.message, {
    nodes: error.nodes ?? null,
    source: error.source ?? null,
    positions: error.positions ?? null,
    path: error.path ?? null,
    extensions: {
      ...error.extensions,
      code,
      // Yoga's GRAPHQL_PARSE_FAILED / GRAPHQL_VALIDATION_FAILED stay visible as the reason.
      ...(typeof original === 'string' && original !== code ? { reason: original } : {}),
      requestId,
    },
  });
}

function useErrorContract(): Plugin<Context> {
  return {
    onResultProcess({ result, setResult }) {
      const requestId = currentRequestScope()?.requestId;
      if (requestId === undefined || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const single = result as ExecutionResult;
      if (!single.errors?.length) return;
      setResult({ ...single, errors: single.errors.map((e) => withErrorContract(e, requestId)) });
    },
    onExecute({ args }) {
      const scope = currentRequestScope();
      if (scope && args.operationName) scope.operation = args.operationName;
      else if (scope) {
        const first = (args.document as DocumentNode).definitions.find((d) => d.kind === 'OperationDefinition');
        const field = first?.kind === 'OperationDefinition' ? first.selectionSet.selections[0] : undefined;
        if (field?.kind === 'Field') scope.operation = field.name.value;
      }
    },
  };
}

export function createApp(services: AppServices): App {
  const { config, log } = services;

  const yoga = createYoga<ServerContext, Context>({
    schema: appSchema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: graphiqlOptions(config),
    logging: {
      debug: (...args) => log.debug({ yoga: args.map(String) }, 'yoga'),
      info: (...args) => log.info({ yoga: args.map(String) }, 'yoga'),
      warn: (...args) => log.warn({ yoga: args.map(String) }, 'yoga'),
      error: (...args) => log.error({ yoga: args.map(String) }, 'yoga'),
    },
    maskedErrors: {
      maskError(error) {
        if (isOriginalGraphQLError(error)) return error;
        const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
        log.error({ err: original }, 'unexpected error, masked for the client');
        return new GraphQLError('Internal server error', {
          ...(error instanceof GraphQLError ? { nodes: error.nodes ?? null, path: error.path ?? null } : {}),
          extensions: { code: ErrorCode.internal },
        });
      },
    },
    plugins: [useErrorContract()],
    context: async ({ request, actionSessionVariables }): Promise<Context> => {
      const scope = currentRequestScope();
      const session = actionSessionVariables
        ? sessionFromVariables(actionSessionVariables)
        : await resolveSession(request.headers, config);
      return {
        services,
        db: services.db,
        session,
        requestId: scope?.requestId ?? randomUUID(),
        deadline: Date.now() + config.requestDeadlineMs,
        log,
      };
    },
  });

  const actions = createActionsHandler(yoga, appSchema, services);

  async function ready(): Promise<Response> {
    try {
      await Promise.race([
        sql`select 1`.execute(services.db),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS).unref()),
      ]);
      return Response.json({ status: 'ready' });
    } catch {
      return Response.json({ status: 'database unavailable' }, { status: 503 });
    }
  }

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/health' && request.method === 'GET') return Response.json({ status: 'ok' });
    if (url.pathname === '/ready' && request.method === 'GET') return ready();
    if (url.pathname !== '/graphql' && url.pathname !== '/actions') {
      return Response.json({ message: `No route for ${request.method} ${url.pathname}; GraphQL is at /graphql` }, { status: 404 });
    }
    let buffered: Request;
    try {
      buffered = await readLimitedBody(request, config.maxBodyBytes);
    } catch (error) {
      if (error instanceof BodyTooLargeError) {
        return Response.json(
          { message: error.message, extensions: { code: ErrorCode.badUserInput } },
          { status: 413 },
        );
      }
      throw error;
    }
    return url.pathname === '/actions' ? actions(buffered) : yoga.fetch(buffered, {});
  }

  return {
    yoga,
    schema: appSchema,
    async fetch(request) {
      const requestId = requestIdOf(request);
      const started = performance.now();
      return runInRequestScope({ requestId }, async () => {
        let response: Response;
        try {
          response = await route(request);
        } catch (error) {
          log.error({ err: error }, 'request failed outside GraphQL');
          response = Response.json(
            { message: 'Internal server error', extensions: { code: ErrorCode.internal, requestId } },
            { status: 500 },
          );
        }
        response.headers.set('x-request-id', requestId);
        const path = new URL(request.url).pathname;
        log[path === '/health' || path === '/ready' ? 'debug' : 'info'](
          { method: request.method, path, status: response.status, durationMs: Math.round(performance.now() - started) },
          'request completed',
        );
        return response;
      });
    },
  };
}
