import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInTransaction } from '../src/db/transaction.js';
import { asUser, createContractRow, createTenant, createTestBackend, errorCodes, gql, type TestBackend } from './support/harness.js';

const SECRET = 'edge-secret-0123456789abcdef';
const asMember = (tenant: string) => ({ ...asUser(tenant), 'x-action-secret': SECRET });

/** A TRY_AGAIN tells the client when to come back: Retry-After in seconds, retryAfterMs in the body, on /graphql and /actions. */
describe('Retry-After', () => {
  let backend: TestBackend;
  let contractId: string;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET, DB_POOL_MAX: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '1500' } });
    await createTenant(backend, 'later');
    contractId = await createContractRow(backend, 'later');
  });
  afterAll(() => backend.close());

  it('comes with TRY_AGAIN on /graphql and /actions, in seconds, with retryAfterMs in the body', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const holder = runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + 20_000 }, async (trx) => {
      await sql`select 1`.execute(trx);
      holding();
      await released;
    });
    await held;
    try {
      const graphql = await gql(
        backend.app.fetch,
        'mutation ($id: UUID!) { createContractDocument(input: { contractId: $id }) { document { id } } }',
        { id: contractId },
        asMember('later'),
      );
      expect(errorCodes(graphql)).toEqual(['TRY_AGAIN']);
      expect(graphql.body.errors![0]!.extensions).toMatchObject({ retryAfterMs: 1500 });
      expect(graphql.headers.get('retry-after')).toBe('2');
      const action = await backend.app.fetch(
        new Request('http://test.local/actions', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-action-secret': SECRET },
          body: JSON.stringify({
            action: { name: 'createContractDocument' },
            input: { input: { contractId } },
            session_variables: asUser('later'),
          }),
        }),
      );
      expect(action.status).toBe(409);
      expect(action.headers.get('retry-after')).toBe('2');
      const body = (await action.json()) as { extensions: Record<string, unknown> };
      expect(body.extensions).toMatchObject({ code: 'TRY_AGAIN', retryAfterMs: 1500 });
      expect(body.extensions).not.toHaveProperty('http');
    } finally {
      release();
      await holder;
    }
  });
});
