import { Kind, type DocumentNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionNode } from 'graphql';

/*
 * Documents come from the parser's cache, and several plugins ask the same of each request's: what
 * follows is worked out once per document (or operation) and kept as long as it is.
 */
const operationsOf = new WeakMap<DocumentNode, OperationDefinitionNode[]>();
const rootFieldsOf = new WeakMap<OperationDefinitionNode, readonly string[]>();
const labelsOf = new WeakMap<OperationDefinitionNode, string>();

/** The operation of a document that runs: the named one, or the only one. */
export function operationOf(document: DocumentNode, operationName: string | null | undefined): OperationDefinitionNode | undefined {
  let operations = operationsOf.get(document);
  if (operations === undefined) {
    operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    operationsOf.set(document, operations);
  }
  return operationName ? operations.find((o) => o.name?.value === operationName) : operations[0];
}

/**
 * The top-level fields an operation runs (__typename aside), through inline fragments and
 * fragment spreads at the top level too: each mutation field is one unit of work.
 */
export function rootFields(document: DocumentNode, operation: OperationDefinitionNode): readonly string[] {
  let fields = rootFieldsOf.get(operation);
  if (fields === undefined) {
    fields = findRootFields(document, operation);
    rootFieldsOf.set(operation, fields);
  }
  return fields;
}

function findRootFields(document: DocumentNode, operation: OperationDefinitionNode): string[] {
  const fragments = new Map(
    document.definitions
      .filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION)
      .map((fragment) => [fragment.name.value, fragment]),
  );
  const spread = new Set<string>();
  const fieldsOf = (selections: readonly SelectionNode[]): string[] =>
    selections.flatMap((selection) => {
      if (selection.kind === Kind.FIELD) return selection.name.value === '__typename' ? [] : [selection.name.value];
      if (selection.kind === Kind.INLINE_FRAGMENT) return fieldsOf(selection.selectionSet.selections);
      // A fragment spread twice merges into the same fields; a cycle would never end (validation refuses it later).
      const fragment = fragments.get(selection.name.value);
      if (!fragment || spread.has(fragment.name.value)) return [];
      spread.add(fragment.name.value);
      return fieldsOf(fragment.selectionSet.selections);
    });
  return fieldsOf(operation.selectionSet.selections);
}

/** The operation label of a request that never reached execution (unparsable, invalid, over a limit). */
export const INVALID_OPERATION = 'invalid';

/**
 * What a request's metrics and log line call its operation: the one root field it runs (a name
 * of the schema, since only valid documents execute), `introspection`, or `multiple`. Never the
 * client's aliases or operation name, so the set of label values is fixed by the schema.
 */
export function operationLabel(document: DocumentNode, operation: OperationDefinitionNode): string {
  let label = labelsOf.get(operation);
  if (label === undefined) {
    label = labelOf(rootFields(document, operation));
    labelsOf.set(operation, label);
  }
  return label;
}

function labelOf(fields: readonly string[]): string {
  const names = new Set(fields);
  if (names.size === 0) return '__typename';
  if (names.size > 1) return 'multiple';
  const [name] = names as unknown as [string];
  return name.startsWith('__') ? 'introspection' : name;
}
