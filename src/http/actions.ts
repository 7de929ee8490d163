import type { GraphQLSchema } from 'graphql';
import type { AppServices, RequestReport } from '../graphql/context.js';
import { ErrorCode, isErrorCode } from '../core/errors.js';
import { actionStatusOf, retryAfterHeader } from './error-status.js';
import { actionDocuments } from './action-documents.js';
import { markReplayed } from './plugins/request-outcome.js';
import { currentRequestScope } from '../core/request-scope.js';
import { actionSecretRefusal } from '../features/identity/session.js';
import type { Logger } from '../core/logger.js';
import type { GraphQLServer } from './yoga.js';
import type { KnownDocumentPath } from './known-document-path.js';
import { jsonAnswer, type Answer } from './answer.js';

function actionError(status: number, code: string, message: string): Answer {
  const requestId = currentRequestScope()?.requestId;
  return jsonAnswer(status, { message, extensions: { code, ...(requestId ? { requestId } : {}) } });
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
 * The action name is a mutation of this schema and `input` its arguments. The operation runs
 * through Yoga's operation pipeline (`getResultForParams`: every plugin's hooks from onParams on,
 * the same admission, caches, context, masking and error contract as on /graphql), or, once its
 * document is compiled, through the known-document path with the same parts, with no second
 * HTTP request and response to build and read: the answer is Hasura's shape, not a GraphQL response.
 * It answers the payload object itself with 200, or an error as a 4xx `{message, extensions:
 * {code}}` (Hasura drops the message of a 5xx).
 */
/** `body`: the request's body when the caller has already read it (the request then has none). */
export type ActionsHandler = (request: Request, report: RequestReport, body?: string) => Promise<Answer>;

/** The operation's result, or null when its path threw on its way (a bug: logged, answered 500). */
async function resultOf<T>(log: Logger, run: () => Promise<T>): Promise<T | null> {
  try {
    return await run();
  } catch (error) {
    log.error({ err: error }, 'an action failed outside its operation');
    return null;
  }
}

export function createActionsHandler(
  yoga: GraphQLServer,
  schema: GraphQLSchema,
  services: AppServices,
  knownDocuments: KnownDocumentPath,
): ActionsHandler {
  const documents = actionDocuments(schema);

  return async (request, report, body) => {
    if (request.method !== 'POST') return actionError(405, ErrorCode.badUserInput, 'Actions are POST requests');
    const { config } = services;
    const refusal = actionSecretRefusal(request.headers.get('x-action-secret'), config, '/actions');
    if (refusal !== null) return actionError(actionStatusOf[refusal.code], refusal.code, refusal.message);

    const parsed = parseActionBody(body ?? (await request.text()));
    if (typeof parsed === 'string') return actionError(400, ErrorCode.badUserInput, parsed);
    const query = documents.get(parsed.name);
    if (query === undefined) return actionError(404, ErrorCode.notFound, `Unknown action "${parsed.name}"`);

    // The action's request stands in for Yoga's: the context reads Idempotency-Key from its headers.
    // Its document is the same text every time: known to the known-document path from its third call.
    const params = { query, variables: parsed.input, operationName: parsed.name };
    const result = await resultOf(
      services.log,
      async () =>
        (await knownDocuments.answer(request, params, report, parsed.sessionVariables)) ??
        (await yoga.getResultForParams({ request, params }, { actionSessionVariables: parsed.sessionVariables, report })),
    );
    if (!result || Symbol.asyncIterator in result) return actionError(500, ErrorCode.internal, 'Internal server error');
    // Under the error contract already (its plugin's onExecutionResult).
    const { data, errors } = result;
    const first = errors?.[0];
    if (first) {
      // Leave out what Yoga's serializer leaves out: `http` and `unexpected` are the server's own notes.
      const { http: _http, unexpected: _unexpected, ...extensions } = first.extensions;
      const code = isErrorCode(extensions['code']) ? extensions['code'] : ErrorCode.internal;
      const answer = jsonAnswer(actionStatusOf[code], { message: first.message, extensions });
      const retryAfter = retryAfterHeader(extensions);
      if (retryAfter !== null) answer.headers['retry-after'] = retryAfter;
      return answer;
    }
    const answer = jsonAnswer(200, data?.[parsed.name] ?? null);
    markReplayed({ set: (name, value) => (answer.headers[name] = value) }, report);
    return answer;
  };
}
