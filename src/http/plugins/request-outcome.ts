import { isEnumType, type DocumentNode, type ExecutionResult, type GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context, ReportingServerContext, RequestReport } from '../../graphql/context.js';
import { currentRequestScope } from '../../core/request-scope.js';
import { operationLabel, operationOf } from '../operation.js';

/**
 * The values a payload's `status` can take: the schema's `…Status` enums. Anything else under the
 * key `status` is client text (an alias such as `status: title`) and never becomes a label.
 */
const statusesOf = (() => {
  const cache = new WeakMap<GraphQLSchema, Set<string>>();
  return (schema: GraphQLSchema): Set<string> => {
    let statuses = cache.get(schema);
    if (!statuses) {
      statuses = new Set(
        Object.values(schema.getTypeMap())
          .filter((type) => isEnumType(type) && type.name.endsWith('Status'))
          .flatMap((type) => (isEnumType(type) ? type.getValues().map((value) => value.name) : [])),
      );
      cache.set(schema, statuses);
    }
    return statuses;
  };
})();

/**
 * The replay mark: `Idempotent-Replayed: true` on the answer of a request that replayed a stored
 * response. The one rule for it, which Yoga's response hook below and the /actions answer apply.
 */
export function markReplayed(headers: { set(name: string, value: string): void }, report: RequestReport | undefined): void {
  if (report?.replayed) headers.set('idempotent-replayed', 'true');
}

/** Names the operation in the request's log lines and records a business status as its outcome. */
export function useRequestOutcome(): Plugin<Context, ReportingServerContext> {
  return {
    onExecute({ args }) {
      const statuses = statusesOf(args.schema);
      const scope = currentRequestScope();
      const operation = operationOf(args.document as DocumentNode, args.operationName);
      // A log field on the way down: every line logged while it executes names it.
      if (scope && operation) scope.operation = operationLabel(args.document as DocumentNode, operation);
      const { report } = args.contextValue as Context;
      return {
        onExecuteDone({ result }) {
          if (Array.isArray(result) || Symbol.asyncIterator in result) return;
          const data = (result as ExecutionResult).data;
          const first = data ? Object.values(data)[0] : undefined;
          const status = first && typeof first === 'object' ? (first as { status?: unknown }).status : undefined;
          if (typeof status === 'string' && statuses.has(status)) report.outcome = status;
        },
      };
    },
    onResponse({ response, serverContext }) {
      markReplayed(response.headers, serverContext.report);
    },
  };
}
