import type { DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../../graphql/context.js';

/**
 * Validation runs once per parsed document: its result is kept beside the document (the parser's
 * cache hands the same document to every request with its text) and goes when the document does.
 * The rules are this server's own and never change, so the document alone is the key. (Yoga's own
 * validation cache keys by the rules' names as well, and reads every rule's name on every request.)
 * `results` is shared with src/http/run-operation.ts, which executes straight away only documents validated here.
 */
export function useValidationCache(results: WeakMap<DocumentNode, readonly unknown[]>): Plugin<Context> {
  return {
    onValidate({ params, setResult }) {
      const known = results.get(params.documentAST);
      if (known !== undefined) {
        setResult(known);
        return;
      }
      return ({ result }) => {
        results.set(params.documentAST, result);
      };
    },
  };
}
