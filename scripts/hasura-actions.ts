import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isScalarType,
  isSpecifiedScalarType,
  isUnionType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type GraphQLType,
} from 'graphql';
import { declaredScopes } from '../src/graphql/guards.js';
import { HASURA_ROLE_OF } from '../src/features/identity/access.js';

/**
 * Hasura action metadata from the schema: every public mutation as a synchronous action whose
 * handler is this server's /actions. Written by `npm run hasura:metadata` into schema/hasura/;
 * a test fails when the committed files are stale.
 */

/** Hasura gives an action 30 s by default; ours must end first, after the server's own deadline. */
const HASURA_DEFAULT_TIMEOUT_SECONDS = 30;
const DEADLINE_MARGIN_SECONDS = 5;

export function actionTimeoutSeconds(requestDeadlineMs: number): number {
  return Math.min(HASURA_DEFAULT_TIMEOUT_SECONDS - 1, Math.ceil(requestDeadlineMs / 1000) + DEADLINE_MARGIN_SECONDS);
}

/** The Hasura roles of the scopes the mutation declares (`t.withAuth`): the same declaration the server enforces. */
export function rolesOf(field: GraphQLField<unknown, unknown>): string[] {
  const scopes = declaredScopes(field);
  if (!scopes?.length) throw new Error(`mutation ${field.name} declares no access scopes (t.withAuth)`);
  return [...new Set(scopes.map((scope) => HASURA_ROLE_OF[scope]))].sort();
}

/** Every type an action's arguments and payload reach, which the action SDL must declare. */
function reachableTypes(fields: GraphQLField<unknown, unknown>[]): GraphQLNamedType[] {
  const seen = new Map<string, GraphQLNamedType>();
  const visit = (type: GraphQLNamedType) => {
    if (seen.has(type.name) || (isScalarType(type) && isSpecifiedScalarType(type))) return;
    if (isInterfaceType(type) || isUnionType(type)) throw new Error(`Hasura actions cannot use ${type.name}: no interfaces or unions`);
    seen.set(type.name, type);
    if (isObjectType(type) || isInputObjectType(type)) {
      const fields: { type: GraphQLType }[] = Object.values(type.getFields());
      for (const field of fields) visit(getNamedType(field.type));
    }
  };
  for (const field of fields) {
    for (const arg of field.args) visit(getNamedType(arg.type));
    visit(getNamedType(field.type));
  }
  return [...seen.values()].sort((a, b) => a.name.localeCompare(b.name));
}

const description = (text: string | null | undefined, indent = '') =>
  text
    ? `${indent}"""\n${text
        .split('\n')
        .map((line) => `${indent}${line}`)
        .join('\n')}\n${indent}"""\n`
    : '';

/** One type in action SDL: object fields without arguments, input fields without default values. */
function printActionType(type: GraphQLNamedType): string {
  const head = description(type.description);
  if (isScalarType(type)) return `${head}scalar ${type.name}`;
  if (isEnumType(type)) {
    return `${head}enum ${type.name} {\n${type
      .getValues()
      .map((value) => `${description(value.description, '  ')}  ${value.name}`)
      .join('\n')}\n}`;
  }
  if (isInputObjectType(type) || isObjectType(type)) {
    const keyword = isInputObjectType(type) ? 'input' : 'type';
    const fields = Object.values(type.getFields())
      .map((field) => `${description(field.description, '  ')}  ${field.name}: ${field.type.toString()}`)
      .join('\n');
    return `${head}${keyword} ${type.name} {\n${fields}\n}`;
  }
  throw new Error(`unexpected type ${type.name}`);
}

export function actionsGraphql(schema: GraphQLSchema): string {
  const mutations = Object.values(schema.getMutationType()?.getFields() ?? {}).sort((a, b) => a.name.localeCompare(b.name));
  const mutationType = `type Mutation {\n${mutations
    .map((field) => {
      const args = field.args.map((arg) => `${arg.name}: ${arg.type.toString()}`).join(', ');
      return `${description(field.description, '  ')}  ${field.name}${args ? `(${args})` : ''}: ${field.type.toString()}`;
    })
    .join('\n')}\n}`;
  return `${[mutationType, ...reachableTypes(mutations).map(printActionType)].join('\n\n')}\n`;
}

const yamlString = (value: string) => `'${value.replace(/'/g, "''")}'`;

export function actionsYaml(schema: GraphQLSchema, requestDeadlineMs: number): string {
  const mutations = Object.values(schema.getMutationType()?.getFields() ?? {}).sort((a, b) => a.name.localeCompare(b.name));
  const timeout = actionTimeoutSeconds(requestDeadlineMs);
  const actions = mutations.map((field) =>
    [
      `  - name: ${field.name}`,
      '    definition:',
      '      kind: synchronous',
      `      handler: ${yamlString('{{ACTION_BASE_URL}}/actions')}`,
      '      forward_client_headers: true',
      '      headers:',
      '        - name: x-action-secret',
      '          value_from_env: ACTION_SECRET',
      `      timeout: ${timeout}`,
      ...(field.description ? [`    comment: ${yamlString(field.description)}`] : []),
      '    permissions:',
      ...rolesOf(field).map((role) => `      - role: ${role}`),
    ].join('\n'),
  );
  const types = reachableTypes(mutations);
  const names = (predicate: (type: GraphQLNamedType) => boolean) => {
    const matching = types.filter(predicate).map((type) => `    - name: ${type.name}`);
    return matching.length ? `\n${matching.join('\n')}` : ' []';
  };
  return [
    '# Generated by `npm run hasura:metadata` from the GraphQL schema: do not edit by hand.',
    `# Handler: set ACTION_BASE_URL (this server's base URL) and ACTION_SECRET in Hasura's environment.`,
    'actions:',
    ...actions,
    'custom_types:',
    `  enums:${names(isEnumType)}`,
    `  input_objects:${names(isInputObjectType)}`,
    `  objects:${names(isObjectType)}`,
    `  scalars:${names((type) => isScalarType(type))}`,
    '',
  ].join('\n');
}
