import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { complexityFromQuery, createComplexityRule } from '@pothos/plugin-complexity';
import {
  BREAK,
  GraphQLError,
  Kind,
  TypeInfo,
  validate,
  visit,
  visitWithTypeInfo,
  type ArgumentNode,
  type DocumentNode,
  type GraphQLSchema,
  type SelectionNode,
  type ValidationContext,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../../graphql/context.js';
import { ErrorCode } from '../../core/errors.js';
import type { OperationCheck } from './operation-checks.js';

export interface DocumentLimitsOptions {
  maxDepth: number;
  maxAliases: number;
  maxTokens: number;
  maxSelections: number;
}

/** Documents come from the parser's cache: their selections are counted once. */
const selectionCounts = new WeakMap<DocumentNode, number>();

/**
 * Fields, fragment spreads and inline fragments in every definition of the document, counted
 * without recursion (the token limit bounds the walk, not the stack).
 */
function selectionCount(document: DocumentNode): number {
  let count = selectionCounts.get(document);
  if (count === undefined) {
    count = countSelections(document);
    selectionCounts.set(document, count);
  }
  return count;
}

function countSelections(document: DocumentNode): number {
  let count = 0;
  const stack: (readonly SelectionNode[])[] = [];
  for (const definition of document.definitions) {
    if ('selectionSet' in definition && definition.selectionSet) stack.push(definition.selectionSet.selections);
  }
  while (stack.length > 0) {
    for (const selection of stack.pop()!) {
      count++;
      if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet) stack.push(selection.selectionSet.selections);
    }
  }
  return count;
}

/** A refused document: 400 BAD_USER_INPUT, naming the variable that sets the limit. */
function limitError(message: string, variable: string, limit: number): GraphQLError {
  return new GraphQLError(`${message} (${variable} = ${limit})`, {
    extensions: { code: ErrorCode.badUserInput, limit: variable, http: { status: 400 } },
  });
}

/** GraphQL Armor phrases its refusals as syntax errors; ours name the variable instead. */
const armorMessage = (error: GraphQLError) => error.message.replace(/^Syntax Error: /, '').replace(/\.$/, '');

function reportInstead(variable: string, limit: number) {
  return [
    (context: ValidationContext | null, error: GraphQLError) => context?.reportError(limitError(armorMessage(error), variable, limit)),
  ];
}

/**
 * Documents come from the parser's cache: one whose variables feed no field's cost costs the same
 * every time, computed once.
 */
const constantCosts = new WeakMap<DocumentNode, number>();
/** Documents whose cost was found to change with their variables: computed each time, never asked again. */
const variableCosts = new WeakSet<DocumentNode>();

const holdsVariable = (argument: ArgumentNode) => {
  let found = false;
  visit(argument.value, { Variable: () => ((found = true), BREAK) });
  return found;
};

/**
 * Whether the cost can change with the variables: some field whose cost is a function of its
 * arguments (a list's `first`) is given a variable in one of them. A variable that only reaches
 * an input (`issueCoupon(input: $input)`) changes nothing of the cost.
 */
function costDependsOnVariables(schema: GraphQLSchema, document: DocumentNode): boolean {
  const types = new TypeInfo(schema);
  let depends = false;
  visit(
    document,
    visitWithTypeInfo(types, {
      Field(node) {
        const costOfArguments = typeof types.getFieldDef()?.extensions['complexity'] === 'function';
        if (costOfArguments && node.arguments?.some(holdsVariable)) {
          depends = true;
          return BREAK;
        }
        return undefined;
      },
    }),
  );
  return depends;
}

/**
 * The cost of the operation that is about to run, with its variables; null when the variables do
 * not coerce (execution answers that in the standard way).
 */
function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
  context: unknown,
): number | null {
  const cached = constantCosts.get(document);
  if (cached !== undefined) return cached;
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  let cost: number | null = null;
  if (operations.length === 1) {
    // The common case, without the validation machinery: the plugin's own walk of the one operation.
    try {
      cost = complexityFromQuery(document, { schema, ctx: context as object, variables: variables ?? {} }).complexity;
    } catch {
      return null;
    }
  } else {
    const rule = createComplexityRule({
      variableValues: (variables ?? {}) as Record<string, unknown>,
      operationName: operationName ?? undefined,
      context: context as object,
      validate: ({ complexity }) => void (cost = complexity),
    });
    validate(schema, document, [rule]);
  }
  // Only a document of one operation: in one of several, the cost depends on operationName too.
  if (cost !== null && operations.length === 1 && !variableCosts.has(document)) {
    if (costDependsOnVariables(schema, document)) variableCosts.add(document);
    else constantCosts.set(document, cost);
  }
  return cost;
}

/**
 * Bounds what one document may ask for, before anything of it executes (docs/design.md §8):
 * - MAX_QUERY_TOKENS: the parser stops reading after that many tokens, so a huge or deeply nested
 *   document (a 5,000-deep list literal) is refused without recursing through it;
 * - MAX_ALIASES: aliases anywhere in the operation, root fields included (800 aliased mutations);
 * - MAX_QUERY_DEPTH: nesting of selections (introspection exempt);
 * - MAX_SELECTIONS: fields, fragment spreads and inline fragments, counted before validation
 *   runs: the rule that fields of one name can merge compares them pairwise, so 480 copies of
 *   `viewer { role }` (3.8 KB, under the token limit) would cost tens of milliseconds of
 *   validation, and no rule of GraphQL Armor bounds that count;
 * - MAX_QUERY_COST: each field costs 1 and a list its `first` (or its default) times its
 *   selection, as the fields declare with Pothos's complexity plugin; checked with the request's
 *   variables, so `first: $n` counts what $n says (costLimit, among the operation checks).
 */
export function useDocumentLimits(options: DocumentLimitsOptions): Plugin<Context> {
  const { maxDepth, maxAliases, maxTokens, maxSelections } = options;
  return {
    onPluginInit({ addPlugin }) {
      addPlugin(
        maxTokensPlugin({
          n: maxTokens,
          // The parser has no validation context to report to: throwing stops it where it is.
          onReject: [
            (_context: ValidationContext | null, error: GraphQLError) => {
              throw limitError(armorMessage(error), 'MAX_QUERY_TOKENS', maxTokens);
            },
          ],
        }),
      );
      addPlugin(maxAliasesPlugin({ n: maxAliases, propagateOnRejection: false, onReject: reportInstead('MAX_ALIASES', maxAliases) }));
      addPlugin(maxDepthPlugin({ n: maxDepth, propagateOnRejection: false, onReject: reportInstead('MAX_QUERY_DEPTH', maxDepth) }));
    },
    onValidate({ params, setResult }) {
      const found = selectionCount(params.documentAST);
      if (found > maxSelections) {
        setResult([limitError(`Selections limit of ${maxSelections} exceeded, found ${found}`, 'MAX_SELECTIONS', maxSelections)]);
      }
    },
  };
}

/** MAX_QUERY_COST, checked with the request's variables as the operation is about to run (see useDocumentLimits). */
export function costLimit(maxCost: number): OperationCheck {
  return ({ args, document }) => {
    const cost = operationCost(args.schema, document, args.operationName, args.variableValues, args.contextValue);
    if (cost === null || cost <= maxCost) return undefined;
    return { errors: [limitError(`The operation costs ${cost}, more than allowed`, 'MAX_QUERY_COST', maxCost)] };
  };
}
