import { getOperationAST, type DocumentNode, type ExecutionResult } from 'graphql';
import type { GraphQLParams } from 'graphql-yoga';
import type { AppServices } from '../graphql/context.js';
import { validDocument, type KnownDocuments } from './document-cache.js';
import type { AdmissionGate } from './plugins/admission-gate.js';
import { maskUnexpected } from './plugins/error-contract.js';
import { operationContext, type GraphQLServer, type ServerContext } from './yoga.js';

export interface RunOperationParts {
  yoga: GraphQLServer;
  services: AppServices;
  known: KnownDocuments;
  gate: AdmissionGate;
}

/** One GraphQL operation run in process, for a request (its headers, its signal) and Yoga's server context; the result as Yoga's pipeline gives it. */
export type RunOperation = (
  request: Request,
  params: GraphQLParams,
  serverContext: ServerContext,
) => Promise<ExecutionResult | AsyncIterable<ExecutionResult> | undefined>;

/**
 * Runs an operation the HTTP layer has the parameters of (a POST of plain parameters, a Hasura
 * action). It is admitted by the same gate as every other (identity, then a turn). Inside its
 * turn, a document parsed and validated without an error before, whose operation the request's
 * operationName picks, is executed straight away: the
 * context is built and the document run by Yoga's own executor, with every plugin's execution
 * hooks (limits on cost and strings, the Idempotency-Key, the write budget, outcomes, spans,
 * masking); what parsing and validating it again would find is already known
 * (src/http/document-cache.ts). Any other document, and every document when trusted documents
 * decide what runs, goes through Yoga's pipeline for parameters, without a second admission.
 */
export function createOperationRunner({ yoga, services, known, gate }: RunOperationParts): RunOperation {
  // Execution's hooks do not depend on the request: one executor for every request.
  const { execute, schema } = yoga.getEnveloped();
  const contextOf = operationContext(services);
  const maskError = maskUnexpected(services.log);
  // With trusted documents the manifest decides, on Yoga's parameters, what a client may run.
  const knownRun = services.config.edge.trustedDocumentsPath === null;

  function executeKnown(request: Request, params: GraphQLParams, document: DocumentNode, serverContext: ServerContext) {
    services.metrics.knownDocumentOperations.inc();
    // The context Yoga's pipeline builds: the server context itself, given the request and its
    // parameters, then extended with the project's (envelop assigns each extension onto it).
    const yogaContext = Object.assign(serverContext, { request, params });
    return execute({
      schema,
      document,
      contextValue: Object.assign(yogaContext, contextOf(yogaContext)),
      variableValues: params.variables,
      operationName: params.operationName,
    }) as Promise<ExecutionResult>;
  }

  /** What Yoga makes of an error thrown on its way (a trusted-documents refusal, a crash): masked into the result. */
  async function orMasked<T>(work: () => T | Promise<T>): Promise<T | ExecutionResult> {
    try {
      return await work();
    } catch (error) {
      return { errors: [maskError(error)] };
    }
  }

  const throughYoga = (request: Request, params: GraphQLParams, serverContext: ServerContext) =>
    orMasked(() => yoga.getResultForParams({ params, request }, serverContext));

  return (request, params, serverContext) => {
    // With trusted documents the manifest refuses before identity and admission, in the order of Yoga's hooks.
    if (!knownRun) return throughYoga(request, params, serverContext);
    return gate(request, serverContext, () => {
      const document = params.query === undefined ? null : validDocument(known, params.query);
      // Which operation runs depends on the request's operationName: when none resolves (two
      // operations and no name, a name the document lacks), Yoga's parse hook answers for it.
      const operation = document && getOperationAST(document, params.operationName);
      if (document && operation && operation.operation !== 'subscription') {
        return orMasked(() => executeKnown(request, params, document, serverContext));
      }
      return throughYoga(request, params, serverContext);
    });
  };
}
