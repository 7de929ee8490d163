import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { LoadClient, type GraphQLReply } from './load/client.js';
import { countBy } from './load/stats.js';
import {
  asTenantAdmin,
  asUser,
  createContractRow,
  createTenant,
  createTestBackend,
  serveOverHttp,
  type TestBackend,
} from './support/harness.js';

const RATE = 2;
const BURST = 5;
const SENT = 30;

const codeOf = (reply: GraphQLReply) => String(reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');

describe(`the write budget: MEMBER_WRITE_RATE=${RATE}, MEMBER_WRITE_BURST=${BURST}`, () => {
  let backend: TestBackend;
  let contractId: string;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: { MEMBER_WRITE_RATE: String(RATE), MEMBER_WRITE_BURST: String(BURST), ACTION_SECRET: 'write-budget-secret-0123456789' },
    });
    await createTenant(backend, 'budget');
    contractId = await createContractRow(backend, 'budget');
  });
  afterAll(() => backend.close());

  const documents = async (userFilter = '') =>
    (await backend.sql.query<{ n: number }>(`select count(*)::int as n from contract_documents where tenant_id = 'budget' ${userFilter}`))
      .rows[0]!.n;
  const secret = { 'x-action-secret': 'write-budget-secret-0123456789' };

  it('lets one member write its burst and its rate, refuses the rest with TRY_AGAIN and Retry-After, and writes nothing for them', async ({
    annotate,
  }) => {
    const { url, server } = await serveOverHttp(backend);
    const client = new LoadClient(url, SENT);
    try {
      await client.open();
      const before = await documents();
      const started = performance.now();
      // Released together: every request is on its own open socket.
      const replies = await Promise.all(
        Array.from({ length: SENT }, () =>
          client.graphql(print(CreateContractDocumentDocument), { input: { contractId } }, { ...secret, ...asUser('budget', 'writer') }),
        ),
      );
      const elapsedSeconds = (performance.now() - started) / 1000;
      const outcomes = countBy(replies, codeOf);
      const written = (await documents()) - before;
      const allowed = BURST + Math.floor(RATE * elapsedSeconds);
      await annotate(
        `write budget: ${SENT} concurrent createContractDocument of one member in ${elapsedSeconds.toFixed(2)} s: ${JSON.stringify(outcomes)}; ` +
          `${written} documents written; the budget allows ${BURST} + ${RATE}/s x ${elapsedSeconds.toFixed(2)} s = ${allowed}`,
      );
      expect(written).toBe(outcomes['OK']);
      expect(outcomes['OK']).toBeGreaterThanOrEqual(BURST);
      expect(outcomes['OK']).toBeLessThanOrEqual(allowed);
      expect(Object.keys(outcomes).sort()).toEqual(['OK', 'TRY_AGAIN']);
      const refused = replies.filter((reply) => codeOf(reply) === 'TRY_AGAIN');
      expect(refused.every((reply) => Number(reply.headers['retry-after']) >= 1)).toBe(true);
      expect(refused[0]!.body.errors![0]!.extensions).toMatchObject({ reason: 'write budget', retryAfterMs: expect.any(Number) });

      // The same member's reads, another member and the tenant's admin have budgets of their own.
      expect(codeOf(await client.graphql('{ contracts(first: 1) { id } }', {}, { ...secret, ...asUser('budget', 'writer') }))).toBe('OK');
      const others = await Promise.all(
        [asUser('budget', 'reader'), asTenantAdmin('budget')].map((headers) =>
          client.graphql(print(CreateContractDocumentDocument), { input: { contractId } }, { ...secret, ...headers }),
        ),
      );
      expect(others.map(codeOf)).toEqual(['OK', 'OK']);
    } finally {
      client.close();
      await server.close();
    }
  });

  it('refuses the same way on /actions: 409 TRY_AGAIN with Retry-After, nothing written', async () => {
    const action = () =>
      backend.app.fetch(
        new Request('http://hasura.local/actions', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...secret },
          body: JSON.stringify({
            action: { name: 'createContractDocument' },
            input: { input: { contractId } },
            session_variables: { 'x-hasura-role': 'user', 'x-hasura-user-id': 'hasura-writer', 'x-hasura-tenant-id': 'budget' },
          }),
        }),
      );
    const before = await documents();
    const responses = await Promise.all(Array.from({ length: BURST * 3 }, action));
    const statuses = countBy(responses, (response) => String(response.status));
    expect(statuses['200']).toBeGreaterThanOrEqual(BURST);
    expect(statuses['409']).toBeGreaterThan(0);
    expect((await documents()) - before).toBe(statuses['200']);
    const refused = responses.find((response) => response.status === 409)!;
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({ extensions: { code: 'TRY_AGAIN', reason: 'write budget' } });
  });
});
