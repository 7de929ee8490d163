import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildSchema, Kind, parse, print, validate, type OperationDefinitionNode } from 'graphql';
import { CreateTenantDocument } from '../../generated/graphql.js';
import type { LoadScenario } from '../scenario.js';
import { replyOutcome } from '../scenario.js';

const SCHEMA = fileURLToPath(new URL('../../../schema/schema.graphql', import.meta.url));

/** Any one operation of the schema, sent by the members of a tenant in turn. */
export interface OperationSpec {
  /** The operation's name, or `anonymous`. */
  name: string;
  document: string;
  /** Each request's variables, in turn. */
  variables: Record<string, unknown>[];
  /** The tenant to send as; null: one created for the run. */
  tenantId: string | null;
  members: number;
}

/** A document or variables the load tool cannot send: a usage error, before anything starts. */
export class OperationError extends Error {}

/** Members by default: many enough that none writes near MEMBER_WRITE_RATE at the load tool's rates. */
const DEFAULT_OPERATION_MEMBERS = 100;

/**
 * Reads `--document` (one operation, valid against schema/schema.graphql) and `--variables` (a
 * JSON object, or an array of objects sent in turn).
 */
export function readOperation(documentFile: string, variablesFile: string | null, tenantId: string | null): OperationSpec {
  const text = readText(documentFile, '--document');
  let document;
  try {
    document = parse(text);
  } catch (error) {
    throw new OperationError(`--document ${documentFile} does not parse: ${(error as Error).message}`);
  }
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operations.length !== 1)
    throw new OperationError(`--document ${documentFile} must hold exactly one operation, it holds ${operations.length}`);
  const errors = validate(buildSchema(readFileSync(SCHEMA, 'utf8')), document);
  if (errors.length > 0)
    throw new OperationError(`--document ${documentFile} is not valid against the schema: ${errors.map((e) => e.message).join('; ')}`);
  return {
    name: operations[0]!.name?.value ?? 'anonymous',
    document: print(document),
    variables: variablesFile === null ? [{}] : readVariables(variablesFile),
    tenantId,
    members: DEFAULT_OPERATION_MEMBERS,
  };
}

function readText(file: string, flag: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new OperationError(`${flag} ${file} cannot be read: ${(error as Error).message}`);
  }
}

function readVariables(file: string): Record<string, unknown>[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readText(file, '--variables'));
  } catch (error) {
    if (error instanceof OperationError) throw error;
    throw new OperationError(`--variables ${file} is not JSON: ${(error as Error).message}`);
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  if (list.length === 0 || !list.every((item) => typeof item === 'object' && item !== null && !Array.isArray(item))) {
    throw new OperationError(`--variables ${file} must be a JSON object, or a non-empty array of objects`);
  }
  return list as Record<string, unknown>[];
}

/**
 * The operation, request after request, each from the next member of the tenant (member-1,
 * member-2, …) with the next variables of the list. Its answers are counted by status or error
 * code; no invariant is known for an arbitrary operation, so none is checked.
 */
export function operationScenario(runId: string, total: number | null, spec: OperationSpec): LoadScenario {
  const tenantId = spec.tenantId ?? `operation-${runId}`;
  return {
    name: `operation ${spec.name}`,
    async setup(client, sessions) {
      if (spec.tenantId !== null) return;
      const reply = await client.mutation(print(CreateTenantDocument), { input: { id: tenantId, name: tenantId } }, sessions.operator);
      if (reply.body.errors?.length) throw new Error(`createTenant failed: ${JSON.stringify(reply.body.errors)}`);
    },
    request(index, client, sessions) {
      if (total !== null && index >= total) return null;
      const variables = spec.variables[index % spec.variables.length]!;
      return () => client.graphql(spec.document, variables, sessions.member(tenantId, `member-${(index % spec.members) + 1}`));
    },
    outcomeOf: replyOutcome,
    check: async () => [],
  };
}
