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

/** GraphQL's two JSON media types, in the order Yoga's result processor for single results offers them. */
const SINGLE_RESULT_TYPES = ['application/graphql-response+json', 'application/json'] as const;

/** Accept's media types as Yoga reads them: whitespace dropped, lower case, those for a charset other than utf-8 left out, the last listed first. */
function acceptedInYogaOrder(accept: string): string[] {
  const types: string[] = [];
  for (const entry of accept.replace(/\s/g, '').toLowerCase().split(',')) {
    const [type, ...params] = entry.split(';');
    const charset = params.find((param) => param.includes('charset=')) ?? 'charset=utf-8';
    if (charset === 'charset=utf-8') types.push(type!);
  }
  return types.reverse();
}

/** Whether a media type asked for (`*` for any part) covers one offered. */
function covers(asked: string, offered: string): boolean {
  const [kind, subtype] = asked.split('/');
  const [offeredKind, offeredSubtype] = offered.split('/');
  return (kind === '*' || kind === offeredKind) && (subtype === '*' || subtype === offeredSubtype);
}

/**
 * The media type of the answer, chosen as Yoga's negotiation chooses it, when every type the
 * client's Accept asks for is one of GraphQL's JSON types (or a wildcard covering one), the
 * answer of Yoga's processor for single results. The project's typed client asks for both
 * (application/graphql-response+json first). Null when Accept names anything else (an event
 * stream, multipart, a type no processor serves) or nothing Yoga would serve: Yoga negotiates.
 */
export function plainMediaType(accept: string | null | undefined): string | null {
  // Yoga reads an absent or empty Accept as */*, which its JSON processor answers as application/json.
  // The headers almost every client sends are answered here without being parsed; the loop below
  // would choose the same for them.
  if (accept === null || accept === undefined || accept === '' || accept === '*/*' || accept === 'application/json')
    return 'application/json';
  if (accept === 'application/graphql-response+json') return accept;
  let chosen: string | null = null;
  for (const asked of acceptedInYogaOrder(accept)) {
    if (!SINGLE_RESULT_TYPES.some((offered) => covers(asked, offered))) return null;
    // Yoga keeps the last match, over the asked types in its order and the offered ones in theirs.
    for (const offered of SINGLE_RESULT_TYPES) if (covers(asked, offered)) chosen = offered;
  }
  return chosen;
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
