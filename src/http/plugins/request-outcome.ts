import type { DocumentNode, ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../../graphql/context.js';
import { currentRequestScope } from '../../request-scope.js';
import { operationLabel, operationOf } from '../operation.js';

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
