import {
  getNamedType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  typeFromAST,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';

/** A value of the type that coerces: what a client would send, with every optional field left out. */
function sampleValue(type: GraphQLInputType): unknown {
  if (isNonNullType(type)) return sampleValue(type.ofType);
  if (isListType(type)) return [sampleValue(type.ofType)];
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields()).filter((field) => isNonNullType(field.type) && field.defaultValue === undefined);
    return Object.fromEntries(fields.map((field) => [field.name, sampleValue(field.type)]));
  }
  const samples: Record<string, unknown> = { UUID: '11111111-1111-4111-8111-111111111111', Int: 1, Float: 1, Boolean: true };
  return samples[type.name] ?? 'x';
}

/** Values for an operation's required variables. */
export function sampleVariables(schema: GraphQLSchema, operation: OperationDefinitionNode): Record<string, unknown> {
  return Object.fromEntries(
    (operation.variableDefinitions ?? [])
      .filter((definition) => definition.type.kind === Kind.NON_NULL_TYPE)
      .map((definition) => [definition.variable.name.value, sampleValue(typeFromAST(schema, definition.type) as GraphQLInputType)]),
  );
}

/**
 * A request that calls one root field with its required arguments as variables, selecting only
 * `__typename` below it: enough to reach the field's guard and resolver.
 */
export function rootFieldRequest(
  operation: 'query' | 'mutation',
  field: GraphQLField<unknown, unknown>,
  values: (name: string, type: GraphQLInputType) => unknown = (_name, type) => sampleValue(type),
): { query: string; variables: Record<string, unknown> } {
  const required = field.args.filter((arg) => isNonNullType(arg.type));
  const definitions = required.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(', ');
  const args = required.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const selection = isObjectType(getNamedType(field.type)) ? ' { __typename }' : '';
  return {
    query: `${operation}${definitions ? `(${definitions})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`,
    variables: Object.fromEntries(required.map((arg) => [arg.name, values(arg.name, arg.type)])),
  };
}
