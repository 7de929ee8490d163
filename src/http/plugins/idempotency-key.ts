import { OperationTypeNode, print, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { badInput } from '../../core/errors.js';
import type { Context } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';
import { fingerprint, isValidKey } from '../../features/idempotency/service.js';
import { operationOf, rootFields } from '../operation.js';

/** Each parsed document printed once: Yoga's parser cache hands back the same document object for the same query text. */
const printedDocuments = new WeakMap<DocumentNode, string>();

function printedOnce(document: DocumentNode): string {
  let printed = printedDocuments.get(document);
  if (printed === undefined) {
    printed = print(document);
    printedDocuments.set(document, printed);
  }
  return printed;
}

/** The request's fingerprint for its Idempotency-Key (see fingerprint): the document in canonical print, printed once. */
export function requestFingerprint(document: DocumentNode, operationName: string | null | undefined, variables: unknown): string {
  return fingerprint(operationName, printedOnce(document), variables);
}

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
      ctx.idempotency = { key, fingerprint: requestFingerprint(args.document as DocumentNode, args.operationName, args.variableValues) };
    },
  };
}
