import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInTransaction } from '../src/db/transaction.js';
import { asUser, createTenant, createTestBackend, errorCodes, gql, holdPoolConnection, type TestBackend } from './support/harness.js';

const CONTRACTS = 20;
const DOCUMENTS_EACH = 50;

/** `count` contracts of the tenant, each with `documents` numbered documents, planted in SQL. */
async function plantContracts(backend: TestBackend, tenantId: string, count: number, documents: number) {
  await backend.sql.query(
    `with made as (
       insert into contracts (tenant_id, title) select $1, 'Contract ' || n from generate_series(1, $2) n returning id
     )
     insert into contract_documents (tenant_id, contract_id, doc_number)
     select $1, id, 10000000 + row_number() over () - 1 from made cross join generate_series(1, $3)`,
    [tenantId, count, documents],
  );
}

const CONTRACTS_WITH_DOCUMENTS = 'query ($n: Int) { contracts(first: $n) { id documents(first: 50) { docNumber } } }';

describe('queries: one statement per level, whatever the data', () => {
  let backend: TestBackend;
  let statements = 0;
  beforeAll(async () => {
    backend = await createTestBackend({ onStatement: () => void statements++ });
    await createTenant(backend, 'many');
    await plantContracts(backend, 'many', CONTRACTS, DOCUMENTS_EACH);
  });
  afterAll(() => backend.close());

  async function statementsFor(contracts: number) {
    const before = statements;
    const response = await gql(backend.app.fetch, CONTRACTS_WITH_DOCUMENTS, { n: contracts }, asUser('many'));
    expect(response.body.errors).toBeUndefined();
    const listed = (response.body.data as { contracts: { documents: { docNumber: number }[] }[] }).contracts;
    expect(listed).toHaveLength(contracts);
    for (const contract of listed) {
      expect(contract.documents).toHaveLength(DOCUMENTS_EACH);
      const numbers = contract.documents.map((d) => d.docNumber);
      expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    }
    return statements - before;
  }

  it(`lists ${CONTRACTS} contracts of ${DOCUMENTS_EACH} documents with as many statements as 1 or 5 contracts`, async ({ annotate }) => {
    await statementsFor(1); // the first request of a tenant also looks the tenant up
    const counts = { one: await statementsFor(1), five: await statementsFor(5), all: await statementsFor(CONTRACTS) };
    await annotate(`statements per request: ${JSON.stringify(counts)}`);
    expect(counts).toEqual({ one: 2, five: 2, all: 2 });
  });

  it('pages a contract’s documents in number order', async () => {
    const response = await gql(backend.app.fetch, '{ contracts(first: 1) { documents(first: 3) { docNumber } } }', {}, asUser('many'));
    const [contract] = (response.body.data as { contracts: { documents: { docNumber: number }[] }[] }).contracts;
    expect(contract!.documents).toHaveLength(3);
    const outOfRange = await gql(backend.app.fetch, '{ contracts(first: 1) { documents(first: 0) { docNumber } } }', {}, asUser('many'));
    expect(errorCodes(outOfRange)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('queries live under the rules of mutations', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: { DB_POOL_MAX: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '300', STATEMENT_TIMEOUT_MS: '300', LOCK_TIMEOUT_MS: '10000' },
    });
    await createTenant(backend, 'rules');
    await plantContracts(backend, 'rules', 2, 2);
  });
  afterAll(() => backend.close());

  it('answers TRY_AGAIN with Retry-After when the pool stays busy', async () => {
    const pool = holdPoolConnection(backend, 20_000);
    await pool.held;
    const response = await gql(backend.app.fetch, '{ contracts { id } }', {}, asUser('rules'));
    pool.release();
    await pool.done;
    expect(errorCodes(response)).toEqual(['TRY_AGAIN']);
    expect(response.body.errors![0]!.extensions).toMatchObject({ reason: 'pool', retryAfterMs: 300 });
    expect(response.body.errors![0]!.extensions).not.toHaveProperty('http');
    expect(response.headers.get('retry-after')).toBe('1');
  });

  it('answers TRY_AGAIN when a read outlasts statement_timeout', async () => {
    const blocker = await backend.sql.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table contracts in access exclusive mode');
      const started = performance.now();
      const response = await gql(backend.app.fetch, '{ contracts { id } }', {}, asUser('rules'));
      const ms = performance.now() - started;
      expect(errorCodes(response)).toEqual(['TRY_AGAIN']);
      expect(response.body.errors![0]!.extensions).toMatchObject({ reason: '57014' });
      expect(ms).toBeLessThan(5_000);
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }
  });

  it('issues no SQL for a request whose client has gone', async () => {
    let statements = 0;
    const watched = await createTestBackend({
      databaseUrl: backend.databaseUrl,
      env: { DB_POOL_MAX: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '5000' },
      onStatement: () => void statements++,
    });
    try {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      const holder = runInTransaction(
        watched.database.db,
        watched.services.transactions,
        { deadline: Date.now() + 20_000 },
        async (trx) => {
          await sql`select 1`.execute(trx);
          holding();
          await released;
        },
      );
      await held;
      const before = statements;
      const client = new AbortController();
      const request = watched.app
        .fetch(
          new Request('http://test.local/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...asUser('rules') },
            body: JSON.stringify({ query: '{ contracts { id documents { id } } }' }),
            signal: client.signal,
          }),
        )
        .catch((error: unknown) => error);
      await sleep(100);
      client.abort();
      release();
      await holder;
      await request;
      await sleep(200);
      expect(statements - before).toBe(0);
    } finally {
      await watched.close();
    }
  });

  it('answers TRY_AGAIN when the database cannot be reached', async () => {
    const unreachable = await createTestBackend({
      databaseUrl: 'postgres://nobody:nothing@127.0.0.1:1/nowhere',
      env: { DB_POOL_ACQUIRE_TIMEOUT_MS: '500' },
    });
    try {
      const response = await gql(unreachable.app.fetch, '{ contracts { id } }', {}, asUser('rules'));
      expect(errorCodes(response)).toEqual(['TRY_AGAIN']);
      expect(response.headers.get('retry-after')).toBe('2');
    } finally {
      await unreachable.close();
    }
  });
});
