import {
  getNamedType,
  isLeafType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';

/** Nested objects deeper than this are left out of an action's answer (Hasura selects from it). */
const MAX_SELECTION_DEPTH = 4;

/**
 * The full selection of an object type: every field without required arguments, recursing into
 * objects, but never into a type already on the path (no cycles) nor deeper than the limit.
 */
function fullSelection(type: GraphQLObjectType, depth = 0, path: ReadonlySet<string> = new Set()): string {
  const inner = new Set(path).add(type.name);
  const fields = Object.values(type.getFields())
    .filter((field) => field.args.every((arg) => !isNonNullType(arg.type) || arg.defaultValue !== undefined))
    .flatMap((field) => {
      const named = getNamedType(field.type);
      if (isLeafType(named)) return [field.name];
      if (isObjectType(named) && depth < MAX_SELECTION_DEPTH && !inner.has(named.name)) {
        return [`${field.name} ${fullSelection(named, depth + 1, inner)}`];
      }
      return [];
    });
  return `{ ${fields.join(' ')} }`;
}

/** The GraphQL document an action runs: the mutation with every argument as a variable. */
function actionDocument(field: GraphQLField<unknown, unknown>): string {
  const variables = field.args.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const returned = getNamedType(field.type);
  const selection = isObjectType(returned) ? ` ${fullSelection(returned)}` : '';
  return `mutation ${field.name}${variables ? `(${variables})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
}

/** The document each action runs, by action (mutation) name. */
export function actionDocuments(schema: GraphQLSchema): Map<string, string> {
  const mutations = schema.getMutationType()?.getFields() ?? {};
  return new Map(Object.values(mutations).map((field) => [field.name, actionDocument(field)]));
}
