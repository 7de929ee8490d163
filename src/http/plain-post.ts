import { processRegularResult, type FetchAPI, type GraphQLParams } from 'graphql-yoga';
import type { RequestReport } from '../graphql/context.js';
import { answerOf, type Answer } from './answer.js';
import { currentRequestScope } from '../request-scope.js';
import { underErrorContract, type ErrorContractOptions } from './plugins/error-contract.js';
import type { RunOperation } from './run-operation.js';

/** The keys of GraphQL's request parameters (GraphQL over HTTP); Yoga refuses any other that is not null. */
const PARAMETER_KEYS = new Set(['query', 'variables', 'operationName', 'extensions']);

const isObjectOrAbsent = (value: unknown) => value === undefined || value === null || (typeof value === 'object' && !Array.isArray(value));

/**
 * The body's GraphQL parameters when they are the plain kind every client sends (a JSON object with
 * a query string, variables and extensions objects or null, an operation name or null, nothing
 * else); null for anything Yoga would have to judge or refuse (a batch, a missing query, an
 * unknown key, text that is not JSON): that takes Yoga's whole path, with its own answers.
 */
export function plainParams(body: string): GraphQLParams | null {
  let params: unknown;
  try {
    params = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return null;
  const fields = params as Record<string, unknown>;
  for (const key in fields) if (!PARAMETER_KEYS.has(key) && fields[key] !== undefined && fields[key] !== null) return null;
  const { query, variables, operationName, extensions } = fields;
  if (typeof query !== 'string') return null;
  if (!isObjectOrAbsent(variables) || !isObjectOrAbsent(extensions)) return null;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return null;
  return params as GraphQLParams;
}

/**
 * Whether Yoga reads the body as JSON: its media type (lower case, as the HTTP layer hands it on)
 * is application/json, alone or with parameters. Anything else is Yoga's to answer (a 415).
 */
export function isPlainContentType(contentType: string | null | undefined): boolean {
  return contentType === 'application/json' || contentType?.startsWith('application/json;') === true;
}

/**
 * The media type of the answer when the client's Accept leaves no choice to make (none, any, or
 * exactly one of GraphQL's JSON types), as Yoga would pick it; null when Yoga must negotiate.
 */
export function plainMediaType(accept: string | null | undefined): string | null {
  if (accept === null || accept === undefined || accept === '' || accept === '*/*' || accept === 'application/json')
    return 'application/json';
  if (accept === 'application/graphql-response+json') return accept;
  return null;
}

/** Takes what Yoga's result processor would hand the Fetch API's Response: the status, headers and body text, as they are. */
class CapturedResponse {
  constructor(
    readonly body: string | null,
    readonly init: { status: number; headers: Record<string, string> },
  ) {}
}
const CAPTURE = { Response: CapturedResponse } as unknown as FetchAPI;

export interface PlainPostParts {
  run: RunOperation;
  contract: ErrorContractOptions;
}

/** Answers a POST of plain parameters for its report, in the media type Accept leaves. */
export type PlainPost = (request: Request, params: GraphQLParams, mediaType: string, report: RequestReport) => Promise<Answer>;

/**
 * A POST of plain parameters, answered the way Yoga answers it but without Yoga's Fetch plumbing
 * around the operation (its server adapter, request parser, result negotiation and Response): the
 * operation runs in process (src/http/run-operation.ts), the error contract shapes its errors as
 * its plugin does, and Yoga's own result processor makes the status, headers and body. What
 * Yoga's response hooks would add is added here: the replay mark
 * (src/http/plugins/request-outcome.ts); CORS and Vary concern requests with an Origin, which
 * never come this way.
 */
export function createPlainPost({ run, contract }: PlainPostParts): PlainPost {
  return async (request, params, mediaType, report) => {
    const result = await run(request, params, { report });
    if (result === undefined) throw new Error('Yoga gave no result for an operation');
    // As the contract's plugin: only a request with an id of its own (every one the HTTP layer serves).
    const requestId = currentRequestScope()?.requestId;
    const asItIs = requestId === undefined || Array.isArray(result) || Symbol.asyncIterator in result;
    const single = asItIs ? result : underErrorContract(result, { requestId, report }, contract);
    const { body, init } = processRegularResult(single, CAPTURE, mediaType) as unknown as CapturedResponse;
    const headers = report.replayed ? { ...init.headers, 'idempotent-replayed': 'true' } : init.headers;
    return answerOf(init.status, headers, body ?? '');
  };
}
