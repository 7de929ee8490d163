import { randomUUID } from 'node:crypto';
import { useDisableIntrospection } from '@envelop/disable-introspection';
import type { GraphQLError } from 'graphql';
import { createYoga, type YogaServerInstance, type YogaServerOptions } from 'graphql-yoga';
import { databaseRunners, type AppServices, type Context, type ReportingServerContext } from '../graphql/context.js';
import type { Session } from '../features/identity/session.js';
import { createDatabaseQueue } from '../graphql/read.js';
import { schema } from '../graphql/schema.js';
import { sessionFromVariables, sessionOfRequest } from '../features/identity/session.js';
import { currentRequestScope } from '../core/request-scope.js';
import { admissionGate, useAdmission, type AdmissionGate, type IdentifiedContext } from './plugins/admission-gate.js';
import { corsOptions } from './plugins/cors.js';
import { CompiledExecutions } from './plugins/compiled-execution.js';
import { costLimit, useDocumentLimits } from './plugins/document-limits.js';
import {
  clientErrorCode,
  createErrorContract,
  maskUnexpected,
  noteExecutionErrors,
  useErrorContract,
  type ErrorContract,
} from './plugins/error-contract.js';
import { checkIdempotencyKey } from './plugins/idempotency-key.js';
import { useOperationChecks, type OperationChecks } from './plugins/operation-checks.js';
import { nameOperation, recordBusinessOutcome, useResponseHeaders } from './plugins/request-outcome.js';
import { refuseUnstorableStrings } from './plugins/string-inputs.js';
import { writeBudget } from './plugins/write-budget.js';
import { knownDocuments, type KnownDocuments } from './document-cache.js';
import { KnownDocumentPath } from './known-document-path.js';
import { useOperationSpans } from './plugins/operation-spans.js';
import { useTrustedDocuments } from './plugins/trusted-documents.js';
import { useValidationCache } from './plugins/validation-cache.js';

/** What the HTTP layer hands to Yoga: the request's report; on /actions the session from Hasura's body, already authenticated. */
interface ServerContext extends IdentifiedContext, ReportingServerContext {
  actionSessionVariables?: Record<string, unknown>;
}

export type GraphQLServer = YogaServerInstance<ServerContext, Context>;

/** The session of a GraphQL request: Hasura's body on /actions, else the request's headers. */
function identify(services: AppServices) {
  return (request: Request, { actionSessionVariables }: ServerContext): Promise<Session | null> =>
    actionSessionVariables
      ? Promise.resolve().then(() => sessionFromVariables(actionSessionVariables))
      : sessionOfRequest(request, services.config, services.log);
}

/**
 * One GraphQL context per request: the session and deadline admission decided on (see
 * plugins/admission-gate.ts), the client's signal, the runners on the root pool.
 */
function operationContext(services: AppServices) {
  const { log } = services;
  const database = databaseRunners(services.pool, services.transactions);
  return ({ request, identified, report }: IdentifiedContext & ReportingServerContext & { request: Request }): Context => {
    if (identified === undefined) throw new Error('A GraphQL context was built for an operation that was not admitted');
    return {
      services,
      database,
      session: identified.session,
      requestId: currentRequestScope()?.requestId ?? randomUUID(),
      deadline: identified.deadline,
      turn: identified.turn,
      signal: request.signal,
      databaseQueue: createDatabaseQueue(),
      log,
      idempotencyKeyHeader: request.headers.get('idempotency-key'),
      idempotency: null,
      report: report ?? {},
    };
  };
}

/**
 * Handed to Yoga after a request's server context, as a part of it with nothing in it. Handed one
 * object, @whatwg-node/server builds the context on it as a prototype (a new one per request), on
 * which every property added later (Yoga's, the plugins', the context factory's) is slow: envelop's
 * copy of the context alone cost 40 µs per request. Handed two, it copies them into a plain object,
 * of one shape for every request of a path (the socket's, the Fetch path's). The context then has
 * no `waitUntil` of the server adapter's: nothing of Yoga, envelop or the project reads it, and work
 * that outlives a response here is the backend's own (the outbox, the workers), never a request's.
 */
export const PLAIN_CONTEXT_PART: Partial<ServerContext> = Object.freeze({});

/** The admission of every GraphQL operation: identity from the request (or Hasura's body), then a turn. */
function operationAdmission(services: AppServices): AdmissionGate {
  return admissionGate({
    admission: services.admission,
    identify: identify(services),
    maskError: maskUnexpected(services.log),
    requestDeadlineMs: services.config.requests.deadlineMs,
  });
}

/** Whether operations make spans: tracing is configured (startTracing starts it from the same settings). */
const tracesOperations = (tracing: AppServices['config']['tracing']) => tracing.tracesEndpoint !== null || tracing.console;

/**
 * What the server is built around besides the services, shared with the paths that answer an
 * operation outside Yoga's pipeline (/actions' answer, the known-document path): the documents known
 * to it, the admission gate, the compiled executions, the rules around execution, the masking and
 * the error contract. One object each, so that every path applies the same ones.
 */
export interface GraphQLServerParts {
  known: KnownDocuments;
  gate: AdmissionGate;
  compiled: CompiledExecutions;
  checks: OperationChecks;
  /** The error masking Yoga is given (maskUnexpected). */
  maskError: (error: unknown) => GraphQLError;
  contract: ErrorContract;
  logging: YogaLogger;
}

export function graphQLServerParts(services: AppServices): GraphQLServerParts {
  const { config, log } = services;
  const { edge } = config;
  return {
    known: knownDocuments(edge.documentCacheBytes),
    gate: operationAdmission(services),
    compiled: new CompiledExecutions(),
    // Every rule about to execute in one hook: the operation named for the log, then the refusals in order.
    checks: {
      before: [
        nameOperation,
        costLimit(edge.maxQueryCost),
        refuseUnstorableStrings,
        checkIdempotencyKey,
        writeBudget(services.writeBudget),
      ],
      after: [recordBusinessOutcome, noteExecutionErrors],
    },
    maskError: maskUnexpected(log),
    contract: createErrorContract({ hideSuggestions: !edge.introspection }),
    logging: yogaLogging(log),
  };
}

type YogaLogger = Exclude<YogaServerOptions<ServerContext, Context>['logging'], boolean | string | undefined>;

/** What Yoga logs, in the server's log. */
function yogaLogging(log: AppServices['log']): YogaLogger {
  return {
    // Yoga logs several debug lines per request: format them only when someone listens.
    debug: (...args) => log.isLevelEnabled('debug') && log.debug({ yoga: args.map(String) }, 'yoga'),
    info: (...args) => log.isLevelEnabled('info') && log.info({ yoga: args.map(String) }, 'yoga'),
    warn: (...args) => log.warn({ yoga: args.map(String) }, 'yoga'),
    // A client's mistake (a refused argument, a wrong secret) is the client's: its code is in the
    // request's log line already, so it is no error of the server's and its text is not kept.
    error: (...args) =>
      args.every((error) => clientErrorCode(error) !== null)
        ? log.isLevelEnabled('debug') && log.debug({ codes: args.map(clientErrorCode) }, 'client error')
        : log.error({ yoga: args.map(String) }, 'yoga'),
  };
}

/**
 * The known-document path of this server (src/http/known-document-path.ts), with the pipeline's
 * parts. It applies every plugin of createGraphQLServer's list but one: with trusted documents
 * installed (or KNOWN_DOCUMENT_PATH=false, or the document caches off) every request takes the
 * pipeline.
 */
export function knownDocumentPath(services: AppServices, parts: GraphQLServerParts): KnownDocumentPath {
  const { config, metrics } = services;
  return new KnownDocumentPath({
    ...parts,
    // Masked as Yoga masks an execution's errors: a changed error is logged as Yoga logs it.
    maskError: (error) => {
      const masked = parts.maskError(error);
      if (masked !== error) parts.logging.error(error);
      return masked;
    },
    contextOf: operationContext(services),
    knownValid: metrics.knownDocumentOperations,
    answered: metrics.knownDocumentPath,
    operationSpans: tracesOperations(config.tracing),
    enabled: config.edge.knownDocumentPath && parts.known.caches !== null && config.edge.trustedDocumentsPath === null,
  });
}

/**
 * Yoga with the project's plugins. Trusted documents pick the document by hash first; then
 * admission identifies the caller and waits for a turn, inside which the document is parsed,
 * validated and refused by the edge's checks (limits, strings, the key, the write budget) or
 * executed; the error contract shapes whatever comes out.
 */
export function createGraphQLServer(services: AppServices, parts: GraphQLServerParts): GraphQLServer {
  const { config } = services;
  const { edge } = config;
  const { known, gate } = parts;
  return createYoga<ServerContext, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // GraphiQL has a path of its own (see graphiql-page.ts).
    graphiql: false,
    logging: parts.logging,
    maskedErrors: { maskError: parts.maskError },
    // Every body reaches Yoga limited already (MAX_BODY_BYTES, see node-dispatch.ts and router.ts): its own check would
    // pipe each body through one more stream for nothing.
    maxRequestBodySize: false,
    // Only JSON bodies reach Yoga (the router answers any other POST 415): a multipart parser would be asked about every request for nothing.
    multipart: false,
    // Bounded by bytes: 3,000 distinct 95 KB documents must not each stay in memory for an hour.
    // Validation results are kept by useValidationCache instead.
    parserAndValidationCache: known.caches === null ? false : { ...known.caches, validationCache: false },
    cors: corsOptions(edge.corsOrigins),
    // Every request to /graphql runs Yoga's whole pipeline, on the socket and on the Fetch path, but a
    // plain POST of a known document, which the known-document path answers with the same parts
    // (knownDocumentPath above); Hasura's actions run the operation's part of it (onParams onwards,
    // src/http/actions.ts), so a rule for every operation belongs there, not in a Yoga request hook
    // (onRequest, onRequestParse). Introspection is refused by a validation rule (envelop's plugin)
    // for that reason. test/pipeline-hooks.isolated.test.ts holds every path to the hooks Yoga's own
    // pipeline runs, and names where the known-document path applies each: a plugin added here fails
    // it until the path applies it too (or turns itself off when it is installed).
    plugins: [
      ...(edge.introspection ? [] : [useDisableIntrospection()]),
      ...(edge.trustedDocumentsPath ? [useTrustedDocuments(config, schema)] : []),
      useResponseHeaders(),
      // First of the onExecute hooks: what wraps the execution wraps the compiled one. (With the document caches off no document
      // object is met twice, so none is compiled.)
      parts.compiled.plugin(),
      // Tracing off costs nothing: no hook runs for it on any request.
      ...(tracesOperations(config.tracing) ? [useOperationSpans()] : []),
      useDocumentLimits({
        maxDepth: edge.maxQueryDepth,
        maxAliases: edge.maxAliases,
        maxTokens: edge.maxQueryTokens,
        maxSelections: edge.maxSelections,
      }),
      useOperationChecks(parts.checks),
      useAdmission(gate),
      useErrorContract(parts.contract),
      // Nothing is kept when the document caches are off (DOCUMENT_CACHE_BYTES=0).
      ...(known.caches === null ? [] : [useValidationCache(known.validations, services.metrics.knownDocumentOperations)]),
    ],
    context: operationContext(services),
  });
}
