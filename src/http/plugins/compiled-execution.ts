import { GraphQLError, OperationTypeNode, type DocumentNode, type ExecutionArgs, type ExecutionResult, type Source } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import type { Context } from '../../graphql/context.js';
import { operationOf, rootFields } from '../operation.js';

/** Executions of one document (and operation) by the standard executor before it is compiled: a document sent once is never compiled. */
const RUNS_BEFORE_COMPILING = 1;

export type Execute = (args: ExecutionArgs) => unknown;

/** What is known of one operation of a document: how often it ran, then its compiled execution, or that it is never compiled. */
type Entry = { runs: number } | { execute: Execute } | { never: true };

/**
 * Whether graphql-jit may run the operation: queries and mutations of the schema's own fields.
 * Introspection at the top level (GraphiQL's schema query, rare and large) stays with the standard
 * executor, as do subscriptions, which the schema has none of.
 */
function compilable(document: DocumentNode, operationName: string | null | undefined): boolean {
  const operation = operationOf(document, operationName);
  if (!operation || operation.operation === OperationTypeNode.SUBSCRIPTION) return false;
  return !rootFields(document, operation).some((field) => field.startsWith('__'));
}

/** Offsets in the source of the (1-based) lines and columns graphql-jit reports its errors at. */
function positionsIn(source: Source, locations: readonly { line: number; column: number }[] | undefined): number[] | undefined {
  if (!locations) return undefined;
  const lineStarts = [0];
  for (let at = source.body.indexOf('\n'); at !== -1; at = source.body.indexOf('\n', at + 1)) lineStarts.push(at + 1);
  return locations.map(({ line, column }) => (lineStarts[line - 1] ?? 0) + column - 1);
}

/**
 * An error of the compiled execution as the standard executor makes it (graphql's locatedError):
 * a GraphQLError thrown with its path already is itself; anything else is a GraphQLError at the
 * field's place whose extensions are its cause's. graphql-jit's own errors (a null in a non-null
 * field, a value a scalar could not serialize) get a plain Error as their cause, as the executor's
 * have, so that the error contract masks them as unexpected.
 */
function asExecutorError(error: GraphQLError, source: Source | undefined): GraphQLError {
  const cause = error.originalError;
  if (cause instanceof GraphQLError && cause.path) return cause;
  return new GraphQLError(error.message, {
    source: source ?? null,
    positions: source ? (positionsIn(source, error.locations) ?? null) : null,
    path: error.path ?? null,
    originalError: cause ?? new Error(error.message),
  });
}

type Place = Pick<GraphQLError, 'locations' | 'path'>;

/** Paths in the order a depth-first walk meets them (list items by index). */
function comparePaths(a: Place['path'] = [], b: Place['path'] = []): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const [x, y] = [a[i]!, b[i]!];
    if (x !== y) return typeof x === 'number' && typeof y === 'number' ? x - y : String(x) < String(y) ? -1 : 1;
  }
  return a.length - b.length;
}

/**
 * Errors in the order the standard executor raises them: graphql-jit lists the nulls found in
 * non-null fields after every other error; the executor lists each as it meets it, walking the
 * document's fields in order (for fields that resolve at once; those that wait are listed as they
 * finish, by either executor). Ordered by place in the document, then by path.
 */
function byPlace(a: Place, b: Place): number {
  const [x, y] = [a.locations?.[0], b.locations?.[0]];
  const byLocation = x && y ? x.line - y.line || x.column - y.column : 0;
  return byLocation || comparePaths(a.path, b.path);
}

/**
 * The compiled execution of one operation. A request error (its variables do not coerce: nothing
 * was executed) is answered by the standard executor instead, so that its message and its HTTP
 * status are the executor's.
 */
function compiledExecution(compiled: CompiledQuery, document: DocumentNode, standard: Execute): Execute {
  const source = document.loc?.source;
  const settled = (result: ExecutionResult, args: ExecutionArgs) => {
    if (!('data' in result)) return standard(args);
    if (!result.errors) return result;
    // The executor's order of keys too: an answer's bytes are the same.
    return { errors: [...result.errors].sort(byPlace).map((error) => asExecutorError(error, source)), data: result.data };
  };
  return (args) => {
    const result = compiled.query(args.rootValue, args.contextValue, args.variableValues);
    return result instanceof Promise ? result.then((done) => settled(done, args)) : settled(result, args);
  };
}

/**
 * The compiled executions of the known documents (graphql-jit, on envelop's public `setExecuteFn`):
 * an operation the server has executed before is compiled once into a function of its own, which
 * resolves the same resolvers (the schema's, with Pothos's wrappers) without walking the document
 * again on every request. Compiled executions live as long as their document in the parser's cache.
 * The known-document path (src/http/known-document-path.ts) runs them too.
 */
export class CompiledExecutions {
  private readonly known = new WeakMap<DocumentNode, Map<string, Entry>>();

  /** The compiled execution of one operation of a document, once it has one. */
  of(document: DocumentNode, operationName: string | null | undefined): Execute | undefined {
    const entry = this.known.get(document)?.get(operationName ?? '');
    return entry !== undefined && 'execute' in entry ? entry.execute : undefined;
  }

  private entryOf(document: DocumentNode, operationName: string) {
    let operations = this.known.get(document);
    if (operations === undefined) this.known.set(document, (operations = new Map()));
    let entry = operations.get(operationName);
    if (entry === undefined) operations.set(operationName, (entry = { runs: 0 }));
    return { operations, entry };
  }

  /**
   * The plugin that compiles and runs them. Installed before every other onExecute hook, so that
   * a plugin wrapping the execution (the operation spans) wraps the compiled one.
   */
  plugin(): Plugin<Context> {
    return {
      onExecute: ({ args, executeFn, setExecuteFn }) => {
        const document = args.document as DocumentNode;
        const operationName = args.operationName ?? '';
        const { operations, entry } = this.entryOf(document, operationName);
        if ('execute' in entry) return setExecuteFn(entry.execute as typeof executeFn);
        if ('never' in entry || ++entry.runs <= RUNS_BEFORE_COMPILING) return;
        const compiled = compilable(document, args.operationName)
          ? compileQuery(args.schema, document, args.operationName ?? undefined, { disablingCapturingStackErrors: true })
          : null;
        if (compiled === null || !isCompiledQuery(compiled)) return void operations.set(operationName, { never: true });
        const execute = compiledExecution(compiled, document, executeFn as Execute);
        operations.set(operationName, { execute });
        setExecuteFn(execute as typeof executeFn);
      },
    };
  }
}
