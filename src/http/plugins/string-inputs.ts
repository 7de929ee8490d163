import { GraphQLError, visit, type DocumentNode } from 'graphql';
import type { OperationCheck } from './operation-checks.js';
import { ErrorCode } from '../../core/errors.js';

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (code units). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What PostgreSQL cannot store in text (NUL, 22021) or would store mangled (a lone surrogate). */
function unstorable(value: string): string | null {
  if (value.includes('\0')) return 'a NUL character';
  if (LONE_SURROGATE.test(value)) return 'an unpaired surrogate (not valid Unicode)';
  return null;
}

interface Finding {
  path: string;
  problem: string;
}

/**
 * No input type of this schema nests half as deep; a deeper value is refused before the walk
 * below (or anything after it) could exhaust the stack.
 */
const MAX_VALUE_DEPTH = 32;

function inValue(value: unknown, path: string, depth = 0): Finding | null {
  if (depth > MAX_VALUE_DEPTH) return { path, problem: `values nested deeper than ${MAX_VALUE_DEPTH} levels` };
  if (typeof value === 'string') {
    const problem = unstorable(value);
    return problem ? { path, problem } : null;
  }
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = inValue(item, `${path}[${index}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const found = inValue(item, path ? `${path}.${key}` : key, depth + 1);
      if (found) return found;
    }
  }
  return null;
}

/** Documents come from the parser's cache: their literals are judged once, not on every request. */
const literalFindings = new WeakMap<DocumentNode, Finding | null>();

function inLiterals(document: DocumentNode): Finding | null {
  let found = literalFindings.get(document);
  if (found === undefined) {
    found = findInLiterals(document);
    literalFindings.set(document, found);
  }
  return found;
}

/** String literals written in the document itself, named by their argument or input field. */
function findInLiterals(document: DocumentNode): Finding | null {
  let found: Finding | null = null;
  const names: string[] = [];
  visit(document, {
    Argument: { enter: (node) => void names.push(node.name.value), leave: () => void names.pop() },
    ObjectField: { enter: (node) => void names.push(node.name.value), leave: () => void names.pop() },
    StringValue(node) {
      const problem = found ? null : unstorable(node.value);
      if (problem) found = { path: names.join('.') || 'a string', problem };
    },
  });
  return found;
}

/**
 * Refuses, before anything runs, any string argument the database could not store as sent: a NUL
 * byte or an unpaired surrogate, in a variable or in the document, at any depth. The field is
 * named, and the answer is BAD_USER_INPUT (400), never a database error.
 */
export const refuseUnstorableStrings: OperationCheck = ({ args, document }) => {
  const found = inValue(args.variableValues ?? {}, '') ?? inLiterals(document);
  if (!found) return undefined;
  return {
    errors: [
      new GraphQLError(`${found.path} contains ${found.problem}`, {
        extensions: { code: ErrorCode.badUserInput, field: found.path, http: { status: 400 } },
      }),
    ],
  };
};
