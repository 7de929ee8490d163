import type { ExecutionArgs, ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../../graphql/context.js';
import { inSpan, tracing } from '../../core/tracing.js';
import { operationLabel, operationOf } from '../operation.js';

/** What an operation came to: the first root field's status (ISSUED, MONTHLY_CAP, …) or the first error's code. */
function outcomeOf(result: ExecutionResult): string | null {
  const code = result.errors?.[0]?.extensions?.['code'];
  if (typeof code === 'string') return code;
  const first = result.data ? Object.values(result.data)[0] : undefined;
  const status = first && typeof first === 'object' ? (first as { status?: unknown }).status : undefined;
  return typeof status === 'string' ? status : null;
}

type Execute = (args: ExecutionArgs) => unknown;

/**
 * The execution of an operation in a span of its own: the transactions and statements it runs nest
 * inside it. Named by its type and the schema's root field, like the metrics, so the names stay few
 * whatever clients send. Unchanged when tracing is off or the document has no such operation.
 */
export function inOperationSpan(args: ExecutionArgs, execute: Execute): Execute {
  if (!tracing.enabled) return execute;
  const { report } = args.contextValue as Context;
  const operation = operationOf(args.document, args.operationName);
  if (!operation) return execute;
  const type = operation.operation;
  const label = operationLabel(args.document, operation);
  const attributes = { 'graphql.operation.type': type, 'graphql.operation.name': operation.name?.value ?? label };
  return (executeArgs) =>
    inSpan(`${type} ${label}`, { attributes }, async (span) => {
      const result = (await execute(executeArgs)) as ExecutionResult;
      const outcome = outcomeOf(result);
      if (span && outcome) span.setAttribute('app.outcome', outcome);
      if (span && report.replayed) {
        span.setAttribute('app.idempotency.replayed', true);
        span.addEvent('idempotency replay: the stored response of an earlier request with this key');
      }
      return result;
    });
}

/**
 * One span per GraphQL operation (OpenTelemetry's GraphQL conventions), around its execution
 * (inOperationSpan); the known-document path wraps its executions the same way.
 */
export function useOperationSpans(): Plugin<Context> {
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      const spanned = inOperationSpan(args as ExecutionArgs, executeFn as Execute);
      if (spanned !== executeFn) setExecuteFn(spanned as typeof executeFn);
    },
  };
}
