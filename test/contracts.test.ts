import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeNextDocNumber } from '../src/features/contracts/service.js';
import { runInTransaction } from '../src/db/transaction.js';
import {
  ContractDocument,
  CreateContractDocumentDocument,
  CreateContractDocument as CreateContractMutation,
  CreateTenantDocument,
} from './generated/graphql.js';
import { asOperator, asUser, createTestBackend, DATABASE_WORDS, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';

describe('tenants, contracts and document numbers', () => {
  let backend: TestBackend;
  let fetch: (request: Request) => Promise<Response>;
  const count = async (table: string, tenant: string) =>
    (await backend.sql.query<{ n: number }>(`select count(*)::int as n from ${table} where tenant_id = $1`, [tenant])).rows[0]!.n;

  beforeAll(async () => {
    backend = await createTestBackend();
    fetch = backend.app.fetch;
    for (const id of ['alpha', 'beta']) {
      await gqlOk(fetch, CreateTenantDocument, { input: { id, name: `Tenant ${id}` } }, asOperator());
    }
  });
  afterAll(() => backend.close());

  const newContract = async (tenant: string) =>
    (await gqlOk(fetch, CreateContractMutation, { input: { title: 'Purchase agreement' } }, asUser(tenant))).createContract.contract.id;
  const newDocument = async (tenant: string, contractId: string) =>
    (await gqlOk(fetch, CreateContractDocumentDocument, { input: { contractId } }, asUser(tenant))).createContractDocument.document;

  it('numbers each tenant from 10000000, one after another, independently', async () => {
    // Tenants of its own: the first number of a tenant is only first when nothing came before.
    for (const id of ['first-a', 'first-b']) {
      await gqlOk(fetch, CreateTenantDocument, { input: { id, name: `Tenant ${id}` } }, asOperator());
    }
    const alphaContract = await newContract('first-a');
    const betaContract = await newContract('first-b');
    const alpha = [];
    for (let i = 0; i < 3; i++) alpha.push((await newDocument('first-a', alphaContract)).docNumber);
    const beta = [(await newDocument('first-b', betaContract)).docNumber];
    expect(alpha).toEqual([10_000_000, 10_000_001, 10_000_002]);
    expect(beta).toEqual([10_000_000]);

    const contract = await gqlOk(fetch, ContractDocument, { id: alphaContract }, asUser('first-a'));
    expect(contract.contract?.documents.map((d) => d.docNumber)).toEqual(alpha);
  });

  it('gives a number back when the transaction that took it rolls back', async () => {
    const contractId = await newContract('beta');
    const before = (await newDocument('beta', contractId)).docNumber;
    const failing = runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + 5_000 }, async (trx) => {
      await takeNextDocNumber(trx, 'beta');
      throw new Error('failure after the number was taken');
    });
    await expect(failing).rejects.toThrow('failure after the number was taken');
    expect((await newDocument('beta', contractId)).docNumber).toBe(before + 1);
  });

  it("answers NOT_FOUND for another tenant's contract and writes nothing", async () => {
    const alphaContract = await newContract('alpha');
    const documentsBefore = await count('contract_documents', 'beta');
    const response = await gql(fetch, CreateContractDocumentDocument, { input: { contractId: alphaContract } }, asUser('beta'));
    expect(errorCodes(response)).toEqual(['NOT_FOUND']);
    expect(await count('contract_documents', 'beta')).toBe(documentsBefore);
    const read = await gqlOk(fetch, ContractDocument, { id: alphaContract }, asUser('beta'));
    expect(read.contract).toBeNull();
  });

  it('lets only the platform operator create tenants, once per id', async () => {
    const asTenantUser = await gql(fetch, CreateTenantDocument, { input: { id: 'gamma', name: 'Gamma' } }, asUser('alpha'));
    expect(errorCodes(asTenantUser)).toEqual(['FORBIDDEN']);
    const duplicate = await gql(fetch, CreateTenantDocument, { input: { id: 'alpha', name: 'Again' } }, asOperator());
    expect(errorCodes(duplicate)).toEqual(['BAD_USER_INPUT']);
    const created = await gqlOk(fetch, CreateTenantDocument, { input: { id: 'gamma', name: 'Gamma' } }, asOperator());
    expect(created.createTenant.tenant).toMatchObject({ id: 'gamma', monthlyCapYen: 2000 });
  });

  it('counts a title in characters (code points): 200 emoji fit, 201 do not', async () => {
    const titled = (title: string) => gql(fetch, CreateContractMutation, { input: { title } }, asUser('alpha'));
    const fits = await titled('😀'.repeat(200));
    expect(fits.body.errors).toBeUndefined();
    expect(fits.body.data?.createContract.contract.title).toBe('😀'.repeat(200));
    const over = await titled('😀'.repeat(201));
    expect(errorCodes(over)).toEqual(['BAD_USER_INPUT']);
    expect(over.body.errors?.[0]?.message).toBe('title must be at most 200 characters');
  });

  describe('bad input is BAD_USER_INPUT (or 413), writes nothing and shows no database text', () => {
    const cases: [string, string, Record<string, unknown>][] = [
      ['an empty title', 'mutation($i: CreateContractInput!) { createContract(input: $i) { contract { id } } }', { i: { title: '   ' } }],
      ['a missing field', 'mutation($i: CreateContractInput!) { createContract(input: $i) { contract { id } } }', { i: {} }],
      [
        'an unknown field',
        'mutation($i: CreateContractInput!) { createContract(input: $i) { contract { id } } }',
        { i: { title: 'x', owner: 'y' } },
      ],
      [
        'a title of 201 characters',
        'mutation($i: CreateContractInput!) { createContract(input: $i) { contract { id } } }',
        { i: { title: 'x'.repeat(201) } },
      ],
      ['a wrong type', 'mutation($i: CreateContractInput!) { createContract(input: $i) { contract { id } } }', { i: { title: 42 } }],
      ['an inline unknown field', 'mutation { createContract(input: { title: "x", owner: "y" }) { contract { id } } }', {}],
      [
        'not a UUID',
        'mutation($i: CreateContractDocumentInput!) { createContractDocument(input: $i) { document { id } } }',
        { i: { contractId: 'not-a-uuid' } },
      ],
      ['a syntax error', 'mutation { createContract(input: { title: "x" ', {}],
      ['a tenant id with spaces', 'mutation { createTenant(input: { id: "no spaces", name: "x" }) { tenant { id } } }', {}],
      ['a non-positive cap', 'mutation { createTenant(input: { id: "delta", name: "x", monthlyCapYen: 0 }) { tenant { id } } }', {}],
    ];
    for (const [name, query, variables] of cases) {
      it(name, async () => {
        const contractsBefore = await count('contracts', 'alpha');
        const headers = query.includes('createTenant') ? asOperator() : asUser('alpha');
        const response = await gql(fetch, query, variables as never, headers);
        expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
        expect(response.text).not.toMatch(DATABASE_WORDS);
        expect(await count('contracts', 'alpha')).toBe(contractsBefore);
      });
    }

    it('a 1 MB string is refused before it is parsed', async () => {
      const contractsBefore = await count('contracts', 'alpha');
      const response = await gql(fetch, CreateContractMutation, { input: { title: 'x'.repeat(1_000_000) } }, asUser('alpha'));
      expect(response.status).toBe(413);
      expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
      expect(await count('contracts', 'alpha')).toBe(contractsBefore);
    });
  });
});
