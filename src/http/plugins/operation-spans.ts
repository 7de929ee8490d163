import type { DocumentNode, ExecutionResult } from 'graphql';
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

/**
 * One span per GraphQL operation (OpenTelemetry's GraphQL conventions), around its execution: the
 * transactions and statements it runs nest inside it. Named by its type and the schema's root
 * field, like the metrics, so the names stay few whatever clients send.
 */
export function useOperationSpans(): Plugin<Context> {
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      if (!tracing.enabled) return;
      const { report } = args.contextValue as Context;
      const operation = operationOf(args.document as DocumentNode, args.operationName);
      if (!operation) return;
      const type = operation.operation;
      const label = operationLabel(args.document as DocumentNode, operation);
      const attributes = { 'graphql.operation.type': type, 'graphql.operation.name': operation.name?.value ?? label };
      setExecuteFn((executeArgs) =>
        inSpan(`${type} ${label}`, { attributes }, async (span) => {
          const result = (await executeFn(executeArgs)) as ExecutionResult;
          const outcome = outcomeOf(result);
          if (span && outcome) span.setAttribute('app.outcome', outcome);
          if (span && report.replayed) {
            span.setAttribute('app.idempotency.replayed', true);
            span.addEvent('idempotency replay: the stored response of an earlier request with this key');
          }
          return result;
        }),
      );
    },
  };
}
