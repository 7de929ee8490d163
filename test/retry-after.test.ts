import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  asUser,
  callAction,
  createContractRow,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  holdPoolConnection,
  type TestBackend,
} from './support/harness.js';

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
    const holder = holdPoolConnection(backend, 20_000);
    await holder.held;
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
      const action = await callAction(backend.app.fetch, 'createContractDocument', { contractId }, asUser('later'), {
        'x-action-secret': SECRET,
      });
      expect(action.status).toBe(409);
      expect(action.headers.get('retry-after')).toBe('2');
      const body = (await action.json()) as { extensions: Record<string, unknown> };
      expect(body.extensions).toMatchObject({ code: 'TRY_AGAIN', retryAfterMs: 1500 });
      expect(body.extensions).not.toHaveProperty('http');
    } finally {
      holder.release();
      await holder.done;
    }
  });
});
