import { readdir, readFile } from 'node:fs/promises';
import { getIntrospectionQuery, Kind, parse, print, type OperationDefinitionNode } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { asUser, createContractRow, createTenant, createTestBackend, gql, type TestBackend } from './support/harness.js';
import { sampleVariables } from './support/samples.js';

const OPERATIONS_DIR = new URL('../schema/operations/', import.meta.url);

describe('document limits, before anything executes', () => {
  let backend: TestBackend;
  let logged: string[];
  let contractId: string;
  const documentCount = async () =>
    (await backend.sql.query<{ n: number }>("select count(*)::int as n from contract_documents where tenant_id = 'limits'")).rows[0]!.n;

  beforeAll(async () => {
    logged = [];
    const log = createLogger('info', { write: (line: string) => void logged.push(line) });
    backend = await createTestBackend({ log });
    await createTenant(backend, 'limits');
    contractId = await createContractRow(backend, 'limits');
  });
  afterAll(() => backend.close());

  const post = (query: string, variables?: Record<string, unknown>) => gql(backend.app.fetch, query, variables, asUser('limits'));

  /** A refusal: 400, BAD_USER_INPUT, the variable named in the message and in extensions.limit. */
  async function expectRefused(query: string, variable: string, variables?: Record<string, unknown>) {
    // 400 whatever the client accepts, application/json alone included.
    const plainJson = await backend.app.fetch(
      new Request('http://test.local/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...asUser('limits') },
        body: JSON.stringify({ query, variables }),
      }),
    );
    expect(plainJson.status).toBe(400);
    const response = await post(query, variables);
    expect(response.status).toBe(400);
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors).toHaveLength(1);
    const [error] = response.body.errors!;
    expect(error!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit: variable });
    expect(error!.message).toContain(variable);
    return error!.message;
  }

  it('every operation in schema/operations and GraphiQL’s introspection query pass at the defaults', async () => {
    const files = (await readdir(OPERATIONS_DIR)).filter((file) => file.endsWith('.graphql'));
    const sources = await Promise.all(files.map((file) => readFile(new URL(file, OPERATIONS_DIR), 'utf8')));
    const document = parse(sources.join('\n'));
    const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    expect(operations.length).toBeGreaterThan(15);
    for (const operation of operations) {
      const response = await backend.app.fetch(
        new Request('http://test.local/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...asUser('limits') },
          body: JSON.stringify({
            query: print(document),
            operationName: operation.name!.value,
            variables: sampleVariables(backend.app.schema, operation),
          }),
        }),
      );
      const body = (await response.json()) as { errors?: { extensions?: Record<string, unknown> }[] };
      // Other refusals (a role, a missing row) are fine here; a limit is not.
      expect({ operation: operation.name!.value, limits: (body.errors ?? []).map((e) => e.extensions?.['limit']).filter(Boolean) }).toEqual(
        {
          operation: operation.name!.value,
          limits: [],
        },
      );
    }
    const introspection = await post(
      getIntrospectionQuery({
        descriptions: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        schemaDescription: true,
        inputValueDeprecation: true,
      }),
    );
    expect(introspection.body.errors).toBeUndefined();
    expect(introspection.body.data).toHaveProperty('__schema');
  });

  it('refuses 1,000 aliased contract lists by their tokens, before parsing them through', async () => {
    const query = `{ ${Array.from({ length: 1_000 }, (_, i) => `c${i}: contracts(first: 100) { id documents { id } }`).join(' ')} }`;
    expect(query.length).toBeGreaterThan(40_000);
    expect(await expectRefused(query, 'MAX_QUERY_TOKENS')).toMatch(/Token limit of 1000 exceeded/);
  });

  it('refuses a 5,000-deep list literal without a stack overflow, and logs no stack trace', async () => {
    const query = `{ contracts(first: ${'['.repeat(5_000)}1${']'.repeat(5_000)}) { id } }`;
    await expectRefused(query, 'MAX_QUERY_TOKENS');
    expect(logged.join('\n')).not.toMatch(/RangeError|Maximum call stack|"stack"/);
  });

  it('refuses more aliases than MAX_ALIASES, root fields included, and writes nothing', async () => {
    const mutation = `mutation { ${Array.from({ length: 16 }, (_, i) => `d${i}: createContractDocument(input: { contractId: "${contractId}" }) { document { id } }`).join(' ')} }`;
    expect(await expectRefused(mutation, 'MAX_ALIASES')).toMatch(/found 16/);
    expect(await documentCount()).toBe(0);
    const fifteen = `{ ${Array.from({ length: 15 }, (_, i) => `v${i}: viewer { role }`).join(' ')} }`;
    expect((await post(fifteen)).status).toBe(200);
  });

  it('refuses more selections than MAX_SELECTIONS before validating them, through fragments too', async () => {
    // 240 copies of one field: under the token limit, and validation compares them pairwise.
    const copies = (n: number) => `{ ${'viewer { role } '.repeat(n)}}`;
    expect(await expectRefused(copies(240), 'MAX_SELECTIONS')).toMatch(/found 480/);
    expect(
      await expectRefused(`{ ...F } fragment F on Query { ${'viewer { role } '.repeat(100)}role: viewer { role } }`, 'MAX_SELECTIONS'),
    ).toMatch(/found 203/);
    expect((await post(copies(100))).status).toBe(200);
  });

  it('refuses nesting deeper than MAX_QUERY_DEPTH', async () => {
    // Each inline fragment is a level, then viewer and role: `levels` + 2 deep.
    const nested = (levels: number) => `{ ${'... on Query { '.repeat(levels)}viewer { role }${' }'.repeat(levels)} }`;
    expect(await expectRefused(nested(9), 'MAX_QUERY_DEPTH')).toMatch(/found 11/);
    expect((await post(nested(8))).status).toBe(200);
  });

  it('refuses an operation whose lists multiply past MAX_QUERY_COST, counting variables', async () => {
    const literal = '{ contracts(first: 100) { id documents(first: 100) { id docNumber } } }';
    expect(await expectRefused(literal, 'MAX_QUERY_COST')).toMatch(/costs 20[0-9]{3}/);
    const byVariable = 'query ($n: Int) { contracts(first: $n) { id documents(first: $n) { id } } }';
    await expectRefused(byVariable, 'MAX_QUERY_COST', { n: 100 });
    const affordable = await post(byVariable, { n: 20 });
    expect(affordable.status).toBe(200);
    expect(affordable.body.errors).toBeUndefined();
  });

  it('costs the operation that runs, whichever of the document’s operations ran before', async () => {
    const operations = 'query Cheap { __typename } query Costly { contracts(first: 100) { id documents(first: 100) { id } } }';
    for (const order of [
      ['Cheap', 'Costly'],
      ['Costly', 'Cheap'],
    ]) {
      // The comment makes each order a document of its own, with its own entry in the parser's cache.
      const query = `# ${order.join(' then ')}\n${operations}`;
      for (const operationName of order) {
        const response = await backend.app.fetch(
          new Request('http://test.local/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...asUser('limits') },
            body: JSON.stringify({ query, operationName }),
          }),
        );
        expect({ order, operationName, status: response.status }).toEqual({
          order,
          operationName,
          status: operationName === 'Costly' ? 400 : 200,
        });
      }
    }
  });

  it('takes each limit from its variable', async () => {
    const strict = await createTestBackend({
      databaseUrl: backend.databaseUrl,
      env: { MAX_QUERY_DEPTH: '2', MAX_ALIASES: '1', MAX_QUERY_TOKENS: '60', MAX_QUERY_COST: '30' },
    });
    try {
      const send = (query: string) => gql(strict.app.fetch, query, undefined, asUser('limits'));
      const limitOf = async (query: string) => (await send(query)).body.errors?.[0]?.extensions?.['limit'];
      expect(await limitOf('{ contracts { documents { id } } }')).toBe('MAX_QUERY_DEPTH');
      expect(await limitOf('{ a: viewer { role } b: viewer { role } }')).toBe('MAX_ALIASES');
      expect(await limitOf(`{ viewer { ${'role '.repeat(60)}} }`)).toBe('MAX_QUERY_TOKENS');
      expect(await limitOf('{ contracts(first: 30) { id } }')).toBe('MAX_QUERY_COST');
      expect((await send('{ contracts(first: 10) { id } }')).body.errors).toBeUndefined();
    } finally {
      await strict.close();
    }
  });
});
