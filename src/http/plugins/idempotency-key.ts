import { OperationTypeNode, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { badInput } from '../../errors.js';
import type { Context } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';
import { fingerprint, isValidKey } from '../../idempotency/service.js';
import { operationOf, rootFields } from '../operation.js';

/**
 * Idempotency-Key on mutations: checks the key, refuses a key spread over several top-level
 * mutations (one key, one unit of work), and fingerprints the operation and its variables so that
 * runMutation can tell a resend from a different request under the same key.
 */
export function useIdempotencyKey(): Plugin<Context> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue as Context;
      const key = ctx.idempotencyKeyHeader;
      const operation = operationOf(args.document as DocumentNode, args.operationName);
      if (key === null || operation?.operation !== OperationTypeNode.MUTATION) return;
      const refuse = (message: string) => setResultAndStopExecution({ errors: [toGraphQLError(badInput(message, 'Idempotency-Key'))] });
      if (!isValidKey(key)) return refuse('Idempotency-Key must be 1 to 255 printable ASCII characters');
      if (rootFields(args.document as DocumentNode, operation).length > 1) {
        return refuse('An Idempotency-Key covers one mutation: send each top-level mutation in its own request with its own key');
      }
      ctx.idempotency = { key, fingerprint: fingerprint(args.document as DocumentNode, args.operationName, args.variableValues) };
    },
  };
}
