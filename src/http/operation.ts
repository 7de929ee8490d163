import { Kind, type DocumentNode, type OperationDefinitionNode } from 'graphql';

/** The operation of a document that runs: the named one, or the only one. */
export function operationOf(document: DocumentNode, operationName: string | null | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return operationName ? operations.find((o) => o.name?.value === operationName) : operations[0];
}

/** The top-level fields an operation runs (__typename aside): each mutation field is one unit of work. */
export function rootFields(operation: OperationDefinitionNode): string[] {
  return operation.selectionSet.selections.flatMap((s) => (s.kind === Kind.FIELD && s.name.value !== '__typename' ? [s.name.value] : []));
}

/** The operation label of a request that never reached execution (unparsable, invalid, over a limit). */
export const INVALID_OPERATION = 'invalid';

/**
 * What a request's metrics and log line call its operation: the one root field it runs (a name
 * of the schema, since only valid documents execute), `introspection`, or `multiple`. Never the
 * client's aliases or operation name, so the set of label values is fixed by the schema.
 */
export function operationLabel(operation: OperationDefinitionNode): string {
  const names = new Set(rootFields(operation));
  if (names.size === 0) return '__typename';
  if (names.size > 1) return 'multiple';
  const [name] = names as unknown as [string];
  return name.startsWith('__') ? 'introspection' : name;
}
