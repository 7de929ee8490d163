import type { DocumentNode, ExecutionArgs, ExecutionResult, GraphQLError, OperationDefinitionNode } from 'graphql';
import type { Counter } from 'prom-client';
import type { Context, RequestReport } from '../graphql/context.js';
import { schema } from '../graphql/schema.js';
import type { AdmissionGate, IdentifiedContext } from './plugins/admission-gate.js';
import type { CompiledExecutions, Execute } from './plugins/compiled-execution.js';
import type { ErrorContract } from './plugins/error-contract.js';
import type { OperationChecks } from './plugins/operation-checks.js';
import type { KnownDocuments } from './document-cache.js';
import { operationOf } from './operation.js';
import { inOperationSpan } from './plugins/operation-spans.js';

/**
 * The known-document path: a plain POST of a document the server has parsed, validated and
 * compiled already, answered without Yoga's per-request pipeline. That pipeline, its hook loops and
 * promise helpers, cost about 0.5 ms of server CPU per coupon against 0.1 ms for executing the
 * document (docs/benchmarks.md). Here the same parts run once each, in the pipeline's order: the
 * admission gate (identity, then a turn), the context, the known-valid count, the rules before
 * execution (a refusal ends it), the compiled execution (in the operation's span when tracing is
 * on), the watches of the result, Yoga's masking (not of a refusal, as in the pipeline) and the
 * error contract. node-dispatch.ts makes the answer with Yoga's own result processor.
 *
 * Hasura's actions take it too (src/http/actions.ts), with the session from their body. Everything
 * else takes the pipeline: a document that is new, invalid or not compiled yet, a body with more
 * than `query`, `variables` and `operationName`, a request with an Origin or an Accept other than
 * `application/json` (node-dispatch.ts), and every request of a server with trusted documents,
 * which this path does not apply (`enabled` false). test/known-document-path.test.ts compares its
 * answers with the pipeline's, byte for byte.
 */

/** The parameters of a plain POST: nothing but these three keys, each of its GraphQL-over-HTTP type. */
export interface PlainParams {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

const PLAIN_KEYS = new Set(['query', 'variables', 'operationName']);

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The body as plain parameters, or null for anything else (not JSON, a batch, extensions, a wrong type): the pipeline answers those. */
export function plainParamsOf(body: string): PlainParams | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isPlainObject(parsed)) return null;
  for (const key in parsed) if (!PLAIN_KEYS.has(key)) return null;
  const { query, variables, operationName } = parsed;
  if (typeof query !== 'string') return null;
  if (variables !== undefined && variables !== null && !isPlainObject(variables)) return null;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return null;
  return parsed as unknown as PlainParams;
}

/** What the path shares with Yoga's pipeline: the same objects, so that both apply the same rules. */
export interface KnownDocumentPathParts {
  known: KnownDocuments;
  compiled: CompiledExecutions;
  gate: AdmissionGate;
  checks: OperationChecks;
  /** Yoga's masking of one error, as its pipeline applies it to an execution's result. */
  maskError: (error: unknown) => GraphQLError;
  contract: ErrorContract;
  /** The per-request GraphQL context, as Yoga's context factory builds it. */
  contextOf: (serverContext: KnownServerContext) => Context;
  /** graphql_known_document_operations_total, counted as the validation cache counts it. */
  knownValid: Counter;
  /** graphql_known_document_path_total: the operations this path answered. */
  answered: Counter;
  /** Whether the pipeline makes a span of each operation (tracing on): the path wraps its executions the same way. */
  operationSpans: boolean;
  /** False when the pipeline has a plugin this path does not apply: every request then takes the pipeline. */
  enabled: boolean;
}

/** The server context of one operation, as the pipeline's grows: the request, its parameters, the admission's decision. */
export interface KnownServerContext extends IdentifiedContext {
  report: RequestReport;
  request: Request;
  params: PlainParams;
  /** A Hasura action's session, from its body (src/http/actions.ts), as the pipeline's server context carries it. */
  actionSessionVariables?: Record<string, unknown>;
}

/** A known operation, found ready: its document, the operation that runs and its compiled execution. */
interface Ready {
  document: DocumentNode;
  operation: OperationDefinitionNode;
  execute: Execute;
}

export class KnownDocumentPath {
  constructor(private readonly parts: KnownDocumentPathParts) {}

  /**
   * The operation's result (under the error contract), or null when the request is not for this
   * path. A Hasura action's session comes from its body, as it does on the pipeline's path.
   */
  async answer(
    request: Request,
    params: PlainParams,
    report: RequestReport,
    actionSessionVariables?: Record<string, unknown>,
  ): Promise<ExecutionResult | null> {
    const ready = this.readyFor(params);
    if (ready === null) return null;
    const serverContext: KnownServerContext = { report, request, params, ...(actionSessionVariables ? { actionSessionVariables } : {}) };
    const result = await this.parts.gate(request, serverContext, () => this.run(serverContext, ready));
    this.parts.answered.inc();
    return this.parts.contract(result, report) ?? result;
  }

  /** The document parsed, valid and compiled already for this operation; null otherwise. */
  private readyFor(params: PlainParams): Ready | null {
    const { known, compiled, enabled } = this.parts;
    if (!enabled) return null;
    const document = known.caches?.documentCache.get(params.query);
    if (document === undefined || known.validations.get(document)?.length !== 0) return null;
    const execute = compiled.of(document, params.operationName);
    const operation = operationOf(document, params.operationName);
    return execute === undefined || operation === undefined ? null : { document, operation, execute };
  }

  /** Inside the turn, as the pipeline runs it: the context, the validation's count, the rules, the execution, the watches, the masking. */
  private async run(serverContext: KnownServerContext, { document, operation, execute }: Ready): Promise<ExecutionResult> {
    const { checks, maskError, contextOf, knownValid } = this.parts;
    const contextValue = Object.assign(serverContext, contextOf(serverContext)) as KnownServerContext & Context;
    knownValid.inc();
    const { params } = serverContext;
    const args = { schema, document, contextValue, variableValues: params.variables, operationName: params.operationName } as ExecutionArgs;
    const executing = { args, document, operation, ctx: contextValue };
    for (const check of checks.before) {
      const refusal = check(executing);
      if (refusal !== undefined) return this.watched(refusal, args);
    }
    const run = this.parts.operationSpans ? inOperationSpan(args, execute) : execute;
    const result = this.watched((await run(args)) as ExecutionResult, args);
    return result.errors ? { ...result, errors: result.errors.map((error) => maskError(error)) } : result;
  }

  private watched(result: ExecutionResult, args: ExecutionArgs): ExecutionResult {
    for (const watch of this.parts.checks.after) watch(result, args);
    return result;
  }
}
