import {
  getNamedType,
  isLeafType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import type { AppServices, Context } from '../graphql/context.js';
import { ErrorCode, isErrorCode } from '../errors.js';
import { actionStatusOf, retryAfterHeader } from './error-status.js';
import { underErrorContract } from './plugins.js';
import { currentRequestScope } from '../request-scope.js';
import { isDevMode } from '../config.js';
import { secretMatches } from '../identity/session.js';
import type { ServerContext } from './app.js';

/** Nested objects deeper than this are left out of an action's answer (Hasura selects from it). */
const MAX_SELECTION_DEPTH = 4;

/**
 * The full selection of an object type: every field without required arguments, recursing into
 * objects, but never into a type already on the path (no cycles) nor deeper than the limit.
 */
export function fullSelection(type: GraphQLObjectType, depth = 0, path: ReadonlySet<string> = new Set()): string {
  const inner = new Set(path).add(type.name);
  const fields = Object.values(type.getFields())
    .filter((field) => field.args.every((arg) => !isNonNullType(arg.type) || arg.defaultValue !== undefined))
    .flatMap((field) => {
      const named = getNamedType(field.type);
      if (isLeafType(named)) return [field.name];
      if (isObjectType(named) && depth < MAX_SELECTION_DEPTH && !inner.has(named.name)) {
        return [`${field.name} ${fullSelection(named, depth + 1, inner)}`];
      }
      return [];
    });
  return `{ ${fields.join(' ')} }`;
}

/** The GraphQL document an action runs: the mutation with every argument as a variable. */
export function actionDocument(field: GraphQLField<unknown, unknown>): string {
  const variables = field.args.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const returned = getNamedType(field.type);
  const selection = isObjectType(returned) ? ` ${fullSelection(returned)}` : '';
  return `mutation ${field.name}${variables ? `(${variables})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
}

/** The document each action runs, by action (mutation) name. */
export function actionDocuments(schema: GraphQLSchema): Map<string, string> {
  const mutations = schema.getMutationType()?.getFields() ?? {};
  return new Map(Object.values(mutations).map((field) => [field.name, actionDocument(field)]));
}

function actionError(status: number, code: string, message: string): Response {
  const requestId = currentRequestScope()?.requestId;
  return Response.json({ message, extensions: { code, ...(requestId ? { requestId } : {}) } }, { status });
}

interface ActionBody {
  name: string;
  input: Record<string, unknown>;
  sessionVariables: Record<string, unknown>;
}

function parseActionBody(raw: string): ActionBody | string {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return 'The body is not JSON';
  }
  if (typeof body !== 'object' || body === null) return 'The body must be a JSON object';
  const { action, input, session_variables: sessionVariables } = body as Record<string, unknown>;
  const name = typeof action === 'object' && action !== null ? (action as Record<string, unknown>)['name'] : undefined;
  if (typeof name !== 'string' || name === '') return 'action.name must be a string';
  if (input !== undefined && input !== null && (typeof input !== 'object' || Array.isArray(input))) {
    return 'input must be an object of the action arguments';
  }
  if (typeof sessionVariables !== 'object' || sessionVariables === null || Array.isArray(sessionVariables)) {
    return 'session_variables must be an object';
  }
  return {
    name,
    input: (input ?? {}) as Record<string, unknown>,
    sessionVariables: sessionVariables as Record<string, unknown>,
  };
}

/**
 * Hasura Actions at POST /actions: `{action: {name}, input, session_variables, request_query?}`.
 * The action name is a mutation of this schema and `input` its arguments. The operation runs in
 * process through Yoga's own pipeline for parameters (the same plugins, parse and validation
 * caches, context, error masking), with no second HTTP request and response to build and read.
 * It answers the payload object itself with 200, or an error as a 4xx `{message, extensions:
 * {code}}` (Hasura drops the message of a 5xx).
 */
export function createActionsHandler(
  yoga: YogaServerInstance<ServerContext, Context>,
  schema: GraphQLSchema,
  services: AppServices,
): (request: Request) => Promise<Response> {
  const documents = actionDocuments(schema);

  return async (request) => {
    if (request.method !== 'POST') return actionError(405, ErrorCode.badUserInput, 'Actions are POST requests');
    const { actionSecret } = services.config;
    if (actionSecret !== null) {
      if (!secretMatches(request.headers.get('x-action-secret'), actionSecret)) {
        return actionError(401, ErrorCode.unauthenticated, 'Missing or invalid x-action-secret');
      }
    } else if (!isDevMode(services.config)) {
      return actionError(401, ErrorCode.unauthenticated, '/actions needs ACTION_SECRET to be configured');
    }

    const parsed = parseActionBody(await request.text());
    if (typeof parsed === 'string') return actionError(400, ErrorCode.badUserInput, parsed);
    const query = documents.get(parsed.name);
    if (query === undefined) return actionError(404, ErrorCode.notFound, `Unknown action "${parsed.name}"`);

    // The action's request stands in for Yoga's: the context reads Idempotency-Key from its headers.
    const result = await yoga.getResultForParams(
      { params: { query, variables: parsed.input, operationName: parsed.name }, request },
      { actionSessionVariables: parsed.sessionVariables },
    );
    const scope = currentRequestScope();
    if (!result || Symbol.asyncIterator in result || !scope) return actionError(500, ErrorCode.internal, 'Internal server error');
    const { data, errors } = underErrorContract(result, scope, { hideSuggestions: !services.config.edge.introspection });
    const first = errors?.[0];
    if (first) {
      // Leave out what Yoga's serializer leaves out: `http` and `unexpected` are the server's own notes.
      const { http: _http, unexpected: _unexpected, ...extensions } = first.extensions;
      const code = isErrorCode(extensions['code']) ? extensions['code'] : ErrorCode.internal;
      const answer = Response.json({ message: first.message, extensions }, { status: actionStatusOf[code] });
      const retryAfter = retryAfterHeader(extensions);
      if (retryAfter !== null) answer.headers.set('retry-after', retryAfter);
      return answer;
    }
    const answer = Response.json(data?.[parsed.name] ?? null);
    if (scope.replayed) answer.headers.set('idempotent-replayed', 'true');
    return answer;
  };
}
