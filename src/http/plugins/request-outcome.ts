import { isEnumType, type GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context, ReportingServerContext, RequestReport } from '../../graphql/context.js';
import { currentRequestScope } from '../../core/request-scope.js';
import { operationLabel } from '../operation.js';
import { varyOnOrigin } from './cors.js';
import type { OperationCheck, ResultWatch } from './operation-checks.js';

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

/** Names the operation in the request's log lines: every line logged while it executes names it. */
export const nameOperation: OperationCheck = ({ document, operation }) => {
  const scope = currentRequestScope();
  if (scope && operation) scope.operation = operationLabel(document, operation);
  return undefined;
};

/** Records a business status (the first root field's `status`) as the request's outcome. */
export const recordBusinessOutcome: ResultWatch = (result, args) => {
  const data = result.data;
  const first = data ? Object.values(data)[0] : undefined;
  const status = first && typeof first === 'object' ? (first as { status?: unknown }).status : undefined;
  if (typeof status === 'string' && statusesOf(args.schema).has(status)) (args.contextValue as Context).report.outcome = status;
};

/** The headers of Yoga's responses, in one hook: Vary on Origin, and the replay mark. */
export function useResponseHeaders(): Plugin<Context, ReportingServerContext> {
  return {
    onResponse({ request, response, serverContext }) {
      varyOnOrigin(request, response);
      markReplayed(response.headers, serverContext.report);
    },
  };
}
