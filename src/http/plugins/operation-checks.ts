import type { DocumentNode, ExecutionArgs, ExecutionResult, OperationDefinitionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../../graphql/context.js';
import { operationOf } from '../operation.js';

/** The operation about to execute, as every check reads it: its document, the operation that runs and the request's context. */
interface ExecutingOperation {
  args: ExecutionArgs;
  document: DocumentNode;
  operation: OperationDefinitionNode | undefined;
  ctx: Context;
}

/** A rule checked before an operation executes: the answer that refuses it, or nothing to let it run. */
export type OperationCheck = (executing: ExecutingOperation) => ExecutionResult | undefined;

/** Told of every single result of an execution (a refusal's included), before Yoga masks its errors. */
export type ResultWatch = (result: ExecutionResult, args: ExecutionArgs) => void;

export interface OperationChecks {
  /** In order; the first refusal answers the operation and nothing after it runs. */
  before: readonly OperationCheck[];
  after: readonly ResultWatch[];
}

/**
 * The project's rules around execution in one envelop hook: each `onExecute` hook costs the
 * pipeline a payload, its setters and a step of its hook loop on every request, and several rules
 * asked the same document for the operation that runs. Here the operation is found once, the
 * checks run in their order, and one hook object (the same for every request) watches the result.
 */
export function useOperationChecks({ before, after }: OperationChecks): Plugin<Context> {
  const watch = {
    onExecuteDone({ args, result }: { args: ExecutionArgs; result: ExecutionResult | AsyncIterable<unknown> }) {
      if (Array.isArray(result) || Symbol.asyncIterator in result) return;
      for (const watcher of after) watcher(result as ExecutionResult, args);
    },
  };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const document = args.document as DocumentNode;
      const executing = { args, document, operation: operationOf(document, args.operationName), ctx: args.contextValue as Context };
      for (const check of before) {
        const refusal = check(executing);
        if (refusal !== undefined) {
          setResultAndStopExecution(refusal);
          break;
        }
      }
      return watch;
    },
  };
}
