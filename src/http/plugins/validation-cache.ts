import { getOperationAST, type DocumentNode } from 'graphql';
import type { GraphQLParams, Plugin } from 'graphql-yoga';
import type { Counter } from 'prom-client';
import type { Context } from '../../graphql/context.js';

/**
 * An envelop plugin on its public `onValidate` hook (`setResult`), with graphql-js's
 * `getOperationAST`: the cache of validation results that Yoga's own is switched off for
 * (`validationCache: false` in yoga.ts).
 */

/**
 * Validation runs once per parsed document: its result is kept beside the document (the parser's
 * cache hands the same document to every request with its text) and goes when the document does.
 * The rules are this server's own and never change, so the document alone is the key. (Yoga's own
 * validation cache keys by the rules' names as well, and reads every rule's name on every request.)
 * `knownValid` counts the operations that run from a document found valid before (neither parsed nor
 * validated again): the request's operationName picks one of its operations, and it is no subscription.
 */
export function useValidationCache(results: WeakMap<DocumentNode, readonly unknown[]>, knownValid: Counter): Plugin<Context> {
  return {
    onValidate({ params, setResult, context }) {
      const known = results.get(params.documentAST);
      if (known !== undefined) {
        if (known.length === 0) {
          const operation = getOperationAST(params.documentAST, (context as { params?: GraphQLParams }).params?.operationName);
          if (operation && operation.operation !== 'subscription') knownValid.inc();
        }
        setResult(known);
        return;
      }
      return ({ result }) => {
        results.set(params.documentAST, result);
      };
    },
  };
}
