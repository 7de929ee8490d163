import { OperationTypeNode, print, type DocumentNode } from 'graphql';
import { badInput } from '../../core/errors.js';
import { toGraphQLError } from '../../graphql/errors.js';
import { fingerprint, isValidKey } from '../../features/idempotency/service.js';
import { rootFields } from '../operation.js';
import type { OperationCheck } from './operation-checks.js';

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
export const checkIdempotencyKey: OperationCheck = ({ args, document, operation, ctx }) => {
  const key = ctx.idempotencyKeyHeader;
  if (key === null || operation?.operation !== OperationTypeNode.MUTATION) return undefined;
  if (!isValidKey(key)) return keyRefusal('Idempotency-Key must be 1 to 255 printable ASCII characters');
  if (rootFields(document, operation).length > 1) {
    return keyRefusal('An Idempotency-Key covers one mutation: send each top-level mutation in its own request with its own key');
  }
  ctx.idempotency = { key, fingerprint: requestFingerprint(document, args.operationName, args.variableValues) };
  return undefined;
};

const keyRefusal = (message: string) => ({ errors: [toGraphQLError(badInput(message, 'Idempotency-Key'))] });
