import { GraphQLError, Kind, OperationTypeNode, type DocumentNode, type ExecutionResult, type OperationDefinitionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../graphql/context.js';
import { badInput, ErrorCode, isErrorCode } from '../errors.js';
import { toGraphQLError } from '../graphql/errors.js';
import { retryAfterHeader } from './error-status.js';
import { fingerprint, isValidKey } from '../idempotency/service.js';
import { currentRequestScope, type RequestScope } from '../request-scope.js';

export function isOriginalGraphQLError(error: unknown): error is GraphQLError {
  if (!(error instanceof GraphQLError)) return false;
  return error.originalError === undefined || error.originalError === null || error.originalError instanceof GraphQLError;
}

function operationOf(document: DocumentNode, operationName: string | null | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return operationName ? operations.find((o) => o.name?.value === operationName) : operations[0];
}

/** The top-level fields an operation runs (__typename aside): each mutation field is one unit of work. */
function rootFields(operation: OperationDefinitionNode): string[] {
  return operation.selectionSet.selections.flatMap((s) => (s.kind === Kind.FIELD && s.name.value !== '__typename' ? [s.name.value] : []));
}

/** The operation label of a request that never reached execution (unparsable, invalid, over a limit). */
export const INVALID_OPERATION = 'invalid';

/**
 * What a request's metrics and log line call its operation: the one root field it runs (a name
 * of the schema, since only valid documents execute), `introspection`, or `multiple`. Never the
 * client's aliases or operation name, so the set of label values is fixed by the schema.
 */
export function operationLabel(operation: OperationDefinitionNode): string {
  const names = new Set(rootFields(operation));
  if (names.size === 0) return '__typename';
  if (names.size > 1) return 'multiple';
  const [name] = names as unknown as [string];
  return name.startsWith('__') ? 'introspection' : name;
}

/**
 * Every error a client reads has one of the codes of DESIGN §7 and the request id. Parse,
 * validation and variable coercion errors are the client's mistakes: BAD_USER_INPUT.
 */
function withErrorContract(error: GraphQLError, requestId: string, hideSuggestions: boolean): GraphQLError {
  const original = error.extensions['code'];
  const code = isErrorCode(original) ? original : ErrorCode.badUserInput;
  // "Did you mean …?" names fields and values of the schema: with introspection off, it would
  // hand out the schema one guess at a time.
  const message = hideSuggestions ? error.message.replace(/\s*Did you mean [^?]*\?/g, '') : error.message;
  const retryAfter = retryAfterHeader(error.extensions);
  const http = (error.extensions['http'] ?? {}) as Record<string, unknown>;
  return new GraphQLError(message, {
    nodes: error.nodes ?? null,
    source: error.source ?? null,
    positions: error.positions ?? null,
    path: error.path ?? null,
    extensions: {
      ...error.extensions,
      // Yoga turns `http.headers` into response headers and leaves `http` out of the body.
      ...(retryAfter === null ? {} : { http: { ...http, headers: { ...(http['headers'] as object), 'Retry-After': retryAfter } } }),
      code,
      // Yoga's GRAPHQL_PARSE_FAILED / GRAPHQL_VALIDATION_FAILED stay visible as the reason.
      ...(typeof original === 'string' && original !== code ? { reason: original } : {}),
      requestId,
    },
  });
}

export interface ErrorContractOptions {
  /** With introspection off, messages lose their "Did you mean …?". */
  hideSuggestions: boolean;
}

/**
 * The result's errors under the contract, the first one's code recorded as the request's outcome.
 * Yoga's /graphql applies it in the plugin below; /actions, which runs operations without an HTTP
 * response of Yoga's, applies it itself.
 */
export function underErrorContract(result: ExecutionResult, scope: RequestScope, options: ErrorContractOptions): ExecutionResult {
  if (!result.errors?.length) return result;
  const errors = result.errors.map((e) => withErrorContract(e, scope.requestId, options.hideSuggestions));
  scope.outcome ??= String(errors[0]!.extensions['code']);
  return { ...result, errors };
}

export function useErrorContract(options: ErrorContractOptions): Plugin<Context> {
  return {
    onResultProcess({ result, setResult }) {
      const scope = currentRequestScope();
      if (scope === undefined || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const single = result as ExecutionResult;
      if (single.errors?.length) setResult(underErrorContract(single, scope, options));
    },
  };
}

/** Names the operation in the request's log lines and records a business status as its outcome. */
export function useRequestOutcome(): Plugin<Context> {
  return {
    onExecute({ args }) {
      const scope = currentRequestScope();
      const operation = operationOf(args.document as DocumentNode, args.operationName);
      if (scope && operation) scope.operation = operationLabel(operation);
      return {
        onExecuteDone({ result }) {
          if (!scope || Array.isArray(result) || Symbol.asyncIterator in result) return;
          const data = (result as ExecutionResult).data;
          const first = data ? Object.values(data)[0] : undefined;
          const status = first && typeof first === 'object' ? (first as { status?: unknown }).status : undefined;
          if (typeof status === 'string') scope.outcome = status;
        },
      };
    },
    onResponse({ response }) {
      if (currentRequestScope()?.replayed) response.headers.set('idempotent-replayed', 'true');
    },
  };
}

/**
 * Idempotency-Key on mutations: checks the key, refuses a key spread over several top-level
 * mutations (one key, one unit of work), and fingerprints the operation and its variables so that
 * runMutation can tell a resend from a different request under the same key.
 */
export function useIdempotencyKey(): Plugin<Context> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue as Context;
      const key = ctx.idempotencyKeyHeader;
      const operation = operationOf(args.document as DocumentNode, args.operationName);
      if (key === null || operation?.operation !== OperationTypeNode.MUTATION) return;
      const refuse = (message: string) =>
        setResultAndStopExecution({ errors: [toGraphQLError(badInput(message, 'Idempotency-Key'))] });
      if (!isValidKey(key)) return refuse('Idempotency-Key must be 1 to 255 printable ASCII characters');
      if (rootFields(operation).length > 1) {
        return refuse('An Idempotency-Key covers one mutation: send each top-level mutation in its own request with its own key');
      }
      ctx.idempotency = { key, fingerprint: fingerprint(args.document as DocumentNode, args.operationName, args.variableValues) };
    },
  };
}
