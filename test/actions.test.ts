import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContractDocument } from './generated/graphql.js';
import {
  asUser,
  createContractRow,
  createTenant,
  createTestBackend,
  DATABASE_WORDS,
  gqlOk,
  serveOverHttp,
  type TestBackend,
} from './support/harness.js';

const SECRET = 'action-secret-for-tests-0123456789';

describe('Hasura Actions at POST /actions', () => {
  let backend: TestBackend;
  let contractId: string;
  const documents = async () =>
    (await backend.sql.query<{ n: number }>("select count(*)::int as n from contract_documents where tenant_id = 'act'")).rows[0]!.n;

  const action = (body: unknown, headers: Record<string, string> = { 'x-action-secret': SECRET }) =>
    backend.app.fetch(
      new Request('http://test.local/actions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    );
  const documentAction = (contract: unknown, sessionVariables: Record<string, unknown> = asUser('act')) => ({
    action: { name: 'createContractDocument' },
    input: { input: { contractId: contract } },
    session_variables: sessionVariables,
    request_query: 'mutation { createContractDocument(input: $input) { document { docNumber } } }',
  });

  beforeAll(async () => {
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET } });
    await createTenant(backend, 'act');
    await createTenant(backend, 'other');
    contractId = await createContractRow(backend, 'act');
  });
  afterAll(() => backend.close());

  it('answers the payload object that /graphql returns for the same mutation', async () => {
    const response = await action(documentAction(contractId));
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { document: Record<string, unknown> };
    expect(Object.keys(answer.document).sort()).toEqual(['contractId', 'createdAt', 'docNumber', 'id']);
    const read = await gqlOk(backend.app.fetch, ContractDocument, { id: contractId }, { ...asUser('act'), 'x-action-secret': SECRET });
    const stored = read.contract?.documents.find((d) => d.id === answer.document['id']);
    expect(stored).toEqual({ id: answer.document['id'], contractId, docNumber: answer.document['docNumber'] });
  });

  it('answers the same over a socket, whether the body declares its length or arrives in chunks', async () => {
    const { url, server } = await serveOverHttp(backend);
    // A declared length is read straight off the socket; a chunked body takes the buffered Fetch path.
    const send = (body: string, chunked: boolean) =>
      fetch(url.replace(/\/graphql$/, '/actions'), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-action-secret': SECRET,
          'idempotency-key': 'over-a-socket',
          'x-request-id': 'socket-1',
        },
        ...(chunked ? { body: new Blob([body]).stream(), duplex: 'half' } : { body }),
      } as RequestInit);
    try {
      const before = await documents();
      const body = JSON.stringify(documentAction(contractId));
      const declared = await send(body, false);
      expect(declared.status).toBe(200);
      expect(declared.headers.get('x-request-id')).toBe('socket-1');
      const answer = (await declared.json()) as { document: { docNumber: number } };
      expect(answer.document.docNumber).toBeGreaterThanOrEqual(10000000);
      const resent = await send(body, true);
      expect(resent.status).toBe(200);
      expect(resent.headers.get('idempotent-replayed')).toBe('true');
      expect(await resent.json()).toEqual(answer);
      expect(await documents()).toBe(before + 1);
      for (const chunked of [false, true]) {
        const broken = await send('{"action":', chunked);
        expect({ chunked, status: broken.status }).toEqual({ chunked, status: 400 });
      }
    } finally {
      await server.close();
    }
  });

  it('takes session variables in any case, with request_query absent or null', async () => {
    for (const requestQuery of [undefined, null]) {
      const body = { ...documentAction(contractId, { 'X-Hasura-Role': 'user', 'X-HASURA-TENANT-ID': 'act', 'x-hasura-User-Id': 'm1' }) };
      const response = await action({ ...body, request_query: requestQuery });
      expect(response.status).toBe(200);
    }
  });

  it('refuses a missing or wrong secret with 401 and writes nothing', async () => {
    const before = await documents();
    expect((await action(documentAction(contractId), {})).status).toBe(401);
    expect((await action(documentAction(contractId), { 'x-action-secret': 'not-the-secret-at-all' })).status).toBe(401);
    expect(await documents()).toBe(before);
  });

  it.each([
    ['an unknown action', { action: { name: 'dropEverything' }, input: {}, session_variables: {} }, 404, 'NOT_FOUND'],
    ['a body that is not JSON', '{"action":', 400, 'BAD_USER_INPUT'],
    ['a body without an action name', { input: {}, session_variables: {} }, 400, 'BAD_USER_INPUT'],
    ['a body without session variables', { action: { name: 'createContractDocument' }, input: {} }, 400, 'BAD_USER_INPUT'],
    ['an input of the wrong type', { ...documentAction(12345) }, 400, 'BAD_USER_INPUT'],
    [
      'an input missing its field',
      { action: { name: 'createContractDocument' }, input: { input: {} }, session_variables: asUser('act') },
      400,
      'BAD_USER_INPUT',
    ],
    ['a contract of another tenant', { ...documentAction('00000000-0000-4000-8000-000000000000', asUser('other')) }, 404, 'NOT_FOUND'],
    [
      'a session without a tenant',
      { ...documentAction('00000000-0000-4000-8000-000000000000', { 'x-hasura-role': 'user' }) },
      401,
      'UNAUTHENTICATED',
    ],
  ])('answers %s with a 4xx, a message and a code, and writes nothing', async (_name, body, status, code) => {
    const before = await documents();
    const response = await action(body);
    expect(response.status).toBe(status);
    const payload = (await response.json()) as { message: unknown; extensions: { code: unknown } };
    expect(typeof payload.message).toBe('string');
    expect(payload.extensions.code).toBe(code);
    expect(await documents()).toBe(before);
  });

  it('masks an unexpected failure as a 500 INTERNAL_SERVER_ERROR without database words, as /graphql does', async () => {
    await backend.sql.query('alter table contract_documents rename to contract_documents_away');
    try {
      const response = await action(documentAction(contractId));
      expect(response.status).toBe(500);
      const text = await response.text();
      expect(JSON.parse(text)).toMatchObject({ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } });
      expect(text).not.toMatch(DATABASE_WORDS);
    } finally {
      await backend.sql.query('alter table contract_documents_away rename to contract_documents');
    }
  });
});
