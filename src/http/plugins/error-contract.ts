import { GraphQLError, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { AppError, ErrorCode, isErrorCode } from '../../core/errors.js';
import type { Context, ReportingServerContext, RequestReport } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';
import type { Logger } from '../../core/logger.js';
import { isResourceShortage, sqlStateOf } from '../../db/sqlstate.js';
import { resourceShortage } from '../../db/transaction.js';
import { currentRequestScope } from '../../core/request-scope.js';
import { retryAfterHeader } from '../error-status.js';
import type { ResultWatch } from './operation-checks.js';

/** A GraphQLError made on purpose (a parse or validation error, ours), not one wrapping a thrown error. */
function isOriginalGraphQLError(error: unknown): error is GraphQLError {
  if (!(error instanceof GraphQLError)) return false;
  return error.originalError === undefined || error.originalError === null || error.originalError instanceof GraphQLError;
}

/** The code of a client's mistake Yoga reports (its own code, or its AppError's); null for anything else. */
export function clientErrorCode(error: unknown): ErrorCode | null {
  const original = error instanceof GraphQLError && error.originalError instanceof AppError ? error.originalError : error;
  const code = original instanceof AppError ? original.code : error instanceof GraphQLError ? error.extensions['code'] : undefined;
  return isErrorCode(code) && code !== ErrorCode.internal ? code : null;
}

/**
 * Where an error stands in the document, for the error that masks it: its nodes, and its source and
 * positions too, which are all an error of the compiled execution has (graphql-jit gives no nodes).
 */
const placeOf = (error: GraphQLError) => ({
  nodes: error.nodes ?? null,
  source: error.source ?? null,
  positions: error.positions ?? null,
  path: error.path ?? null,
});

/**
 * Yoga's error masking: an AppError is what the client reads (its code and details); a database
 * error of class 53 or 58 (disk, memory, connection slots, I/O) is TRY_AGAIN; anything else is a bug, logged with its SQLSTATE and answered INTERNAL_SERVER_ERROR with nothing of its cause.
 */
export function maskUnexpected(log: Logger) {
  return (error: unknown): GraphQLError => {
    if (isOriginalGraphQLError(error)) return error;
    const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
    if (original instanceof AppError) return toGraphQLError(original, error instanceof GraphQLError ? error : undefined);
    // A shortage met outside the runners (which translate it themselves) is still the database's want, not a bug.
    if (isResourceShortage(original)) {
      const shortage = resourceShortage(sqlStateOf(original)!, 1);
      // The database's own message names its files: the client reads what ran out instead.
      return new GraphQLError(shortage.message, {
        ...(error instanceof GraphQLError ? placeOf(error) : {}),
        extensions: { ...shortage.extensions },
      });
    }
    log.error({ err: original, sqlState: sqlStateOf(original) ?? undefined }, 'unexpected error, masked for the client');
    return new GraphQLError('Internal server error', {
      ...(error instanceof GraphQLError ? placeOf(error) : {}),
      extensions: { code: ErrorCode.internal },
    });
  };
}

/**
 * What Yoga makes of an error on the HTTP response (it leaves `http` out of the body): a
 * Retry-After header for TRY_AGAIN, and 400 for a document refused by a limit whatever the client
 * accepts (Yoga's own `spec` marker would answer a validation error 200 to `application/json`).
 */
function httpOf(error: GraphQLError): { http?: Record<string, unknown> } {
  const http = { ...((error.extensions['http'] ?? {}) as Record<string, unknown>) };
  const retryAfter = retryAfterHeader(error.extensions);
  if (retryAfter !== null) http['headers'] = { ...(http['headers'] as object), 'Retry-After': retryAfter };
  if (error.extensions['limit'] !== undefined) {
    delete http['spec'];
    http['status'] = 400;
  }
  return Object.keys(http).length > 0 ? { http } : {};
}

/**
 * A request error raised before execution began (CoerceVariableValues: a variable that does not
 * coerce; GetOperation), which the executor marks 400 for every client. The GraphQL-over-HTTP
 * rule for `application/json` answers a well-formed request 200 whatever request error it raised,
 * and `application/graphql-response+json` 400: Yoga's `spec` marker says exactly that, as it does
 * for parse and validation errors. Only errors without a code of ours: a refusal of ours before
 * execution (a limit, an unstorable string) keeps its 400 for everyone.
 */
function markRequestErrors(result: ExecutionResult): void {
  if ('data' in result) return;
  for (const error of result.errors ?? []) {
    const http = error.extensions['http'] as Record<string, unknown> | undefined;
    if (error.extensions['code'] === undefined && http?.['status'] === 400) http['spec'] = true;
  }
}

/**
 * Every error a client reads has one of the codes of docs/design.md §7 and the request id. Parse,
 * validation and variable coercion errors are the client's mistakes: BAD_USER_INPUT.
 */
function withErrorContract(error: GraphQLError, requestId: string, hideSuggestions: boolean): GraphQLError {
  const original = error.extensions['code'];
  const code = isErrorCode(original) ? original : ErrorCode.badUserInput;
  // "Did you mean …?" names fields and values of the schema: with introspection off, it would
  // hand out the schema one guess at a time.
  const message = hideSuggestions ? error.message.replace(/\s*Did you mean [^?]*\?/g, '') : error.message;
  return new GraphQLError(message, {
    nodes: error.nodes ?? null,
    source: error.source ?? null,
    positions: error.positions ?? null,
    path: error.path ?? null,
    extensions: {
      // Yoga's `originalError` keeps its name only: its message repeats the client's body back.
      ...withoutOriginalError(error.extensions),
      ...httpOf(error),
      code,
      // Yoga's GRAPHQL_PARSE_FAILED / GRAPHQL_VALIDATION_FAILED stay visible as the reason.
      ...(typeof original === 'string' && original !== code ? { reason: original } : {}),
      requestId,
    },
  });
}

function withoutOriginalError(extensions: GraphQLError['extensions']): Record<string, unknown> {
  const { originalError, ...rest } = extensions;
  if (typeof originalError !== 'object' || originalError === null) return rest;
  return { ...rest, originalError: { name: (originalError as { name?: unknown }).name } };
}

export interface ErrorContractOptions {
  /** With introspection off, messages lose their "Did you mean …?". */
  hideSuggestions: boolean;
}

/** What the contract needs of the request: its id for every error, its report for the outcome. */
interface ContractedRequest {
  requestId: string;
  report: RequestReport;
}

/**
 * The result's errors under the contract, the first one's code recorded as the request's outcome.
 * Applied only by the plugin below, on every path an operation takes.
 */
function underErrorContract(result: ExecutionResult, request: ContractedRequest, options: ErrorContractOptions): ExecutionResult {
  if (!result.errors?.length) return result;
  const errors = result.errors.map((e) => withErrorContract(e, request.requestId, options.hideSuggestions));
  request.report.outcome ??= String(errors[0]!.extensions['code']);
  return { ...result, errors };
}

/** The SQLSTATE behind an unexpected error of the execution, before masking hides its cause. */
function unexpectedSqlState(result: ExecutionResult): string | undefined {
  for (const error of result.errors ?? []) {
    const original = error.originalError;
    if (original && !(original instanceof AppError) && !(original instanceof GraphQLError)) return sqlStateOf(original) ?? undefined;
  }
  return undefined;
}

/**
 * An execution's errors as the contract needs them, among the operation checks' watches: it runs
 * before Yoga's masking (a plugin of its own, after ours), while an unexpected error's cause is
 * still there to name its SQLSTATE in the request's report.
 */
export const noteExecutionErrors: ResultWatch = (result, args) => {
  markRequestErrors(result);
  const sqlState = unexpectedSqlState(result);
  if (sqlState !== undefined) (args.contextValue as Context).report.sqlState = sqlState;
};

/** Puts a result under the error contract, once; null when there is nothing to do (no errors, contracted already, not a single result). */
export type ErrorContract = (result: unknown, report: RequestReport | undefined) => ExecutionResult | null;

/** The error contract of one server: every path that answers an operation applies this one. */
export function createErrorContract(options: ErrorContractOptions): ErrorContract {
  const contracted = new WeakSet<ExecutionResult>();
  /** Only a request with an id of its own (every one the HTTP layer serves), and only single results. */
  return (result, report) => {
    const requestId = currentRequestScope()?.requestId;
    if (requestId === undefined || result == null || Array.isArray(result) || Symbol.asyncIterator in (result as object)) return null;
    const single = result as ExecutionResult;
    if (contracted.has(single) || !single.errors?.length) return null;
    const under = underErrorContract(single, { requestId, report: report ?? {} }, options);
    contracted.add(under);
    return under;
  };
}

/**
 * The error contract, in Yoga's hooks (with noteExecutionErrors before them): on the operation's result (`onExecutionResult`, which every
 * operation passes, a Hasura action's included), and, for an answer that never got that far (a
 * body Yoga could not read, a refused trusted document, a crash before execution), on the result
 * Yoga processes into its response. A result is put under the contract once.
 */
export function useErrorContract(contract: ErrorContract): Plugin<Context, ReportingServerContext> {
  return {
    onExecutionResult({ result, setResult, context }) {
      const under = contract(result, (context as ReportingServerContext).report);
      if (under !== null) setResult(under);
    },
    onResultProcess({ result, setResult, serverContext }) {
      const under = contract(result, serverContext.report);
      if (under !== null) setResult(under);
    },
  };
}
