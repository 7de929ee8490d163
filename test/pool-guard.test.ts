import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolReentryError } from '../src/db/pool.js';
import type { DB } from '../src/db/schema.js';
import { runInTransaction } from '../src/db/transaction.js';
import { CreateContractDocument as CreateContract } from './generated/graphql.js';
import { asUser, createTenant, createTestBackend, errorCodes, gql, holdPoolConnection, type TestBackend } from './support/harness.js';

const POOL_SIZE = 4;
const ACQUIRE_TIMEOUT_MS = 1_500;

/**
 * The bug this project exists to make impossible: a unit of work that holds a transaction and,
 * deeper down, queries the root instance. Each such request holds one connection and waits for a
 * second; once as many requests as connections hold theirs, nobody ever gets one. The latch makes
 * that moment certain instead of likely: every unit waits until all of them hold a connection.
 */
function buggyUnitsOfWork(count: number) {
  const allHolding = barrier(count);
  // No unit gives its connection back before every unit's second request has ended: otherwise
  // the first timeout would free a connection for a neighbour still waiting, and it would succeed.
  const allAnswered = barrier(count);
  return async (root: Kysely<DB>, trx: Transaction<DB>) => {
    await sql`select 1`.execute(trx);
    await allHolding();
    try {
      await root.selectFrom('tenants').select('id').execute();
    } finally {
      await allAnswered();
    }
  };
}

/** Resolves for everyone once `count` callers have arrived. */
function barrier(count: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived === count) open();
    return opened;
  };
}

async function settleAll(tasks: Promise<unknown>[]) {
  const started = performance.now();
  const outcomes = await Promise.allSettled(tasks);
  return { ms: performance.now() - started, outcomes };
}

describe('the executor rule', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { DB_POOL_MAX: String(POOL_SIZE), DB_POOL_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS) } });
    await createTenant(backend, 'pool');
  });
  afterAll(() => backend.close());

  it(`without the guard, ${POOL_SIZE} such requests on a pool of ${POOL_SIZE} wait until the acquire timeout, all of them`, async ({
    annotate,
  }) => {
    // A plain pg pool, as the system this grew from had it (with a timeout so the test ends).
    const pool = new pg.Pool({ connectionString: backend.databaseUrl, max: POOL_SIZE, connectionTimeoutMillis: ACQUIRE_TIMEOUT_MS });
    const root = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    try {
      // Open all four connections first, so that only the wait for a fifth can time out.
      const warm = await Promise.all(Array.from({ length: POOL_SIZE }, () => pool.connect()));
      for (const client of warm) client.release();
      const unitOfWork = buggyUnitsOfWork(POOL_SIZE);
      const { ms, outcomes } = await settleAll(
        Array.from({ length: POOL_SIZE }, () => root.transaction().execute((trx) => unitOfWork(root, trx))),
      );
      await annotate(`unguarded: ${POOL_SIZE} requests on a pool of ${POOL_SIZE} all waited ${ms.toFixed(0)} ms, then failed`);
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected');
        expect(String((outcome as PromiseRejectedResult).reason)).toMatch(/timeout exceeded when trying to connect/);
      }
    } finally {
      await root.destroy();
    }
  });

  it(`with the guard, the same ${POOL_SIZE} requests fail at once with PoolReentryError`, async ({ annotate }) => {
    const { db } = backend.database;
    const unitOfWork = buggyUnitsOfWork(POOL_SIZE);
    const { ms, outcomes } = await settleAll(
      Array.from({ length: POOL_SIZE }, () =>
        runInTransaction(db, backend.services.transactions, { deadline: Date.now() + 10_000 }, (trx) => unitOfWork(db, trx)),
      ),
    );
    await annotate(`guarded: ${POOL_SIZE} requests failed in ${ms.toFixed(0)} ms in all`);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(PoolReentryError);
    }
  });

  it('does not refuse the root instance outside a transaction, nor after one ended', async () => {
    const { db } = backend.database;
    await runInTransaction(db, backend.services.transactions, { deadline: Date.now() + 5_000 }, (trx) => sql`select 1`.execute(trx));
    await expect(db.selectFrom('tenants').select('id').execute()).resolves.toBeDefined();
  });

  it('turns an exhausted pool into a quick TRY_AGAIN instead of a hang', async ({ annotate }) => {
    const small = await createTestBackend({
      databaseUrl: backend.databaseUrl,
      env: { DB_POOL_MAX: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '200' },
    });
    try {
      // Connect first: opening a connection on a busy machine can take a good part of the wait the
      // holder below would otherwise spend on it.
      await sql`select 1`.execute(small.database.db);
      // Hold the app's only connection with a transaction of our own until the request has answered.
      const holder = holdPoolConnection(small, 60_000);
      await holder.held;
      const started = performance.now();
      const response = await gql(small.app.fetch, CreateContract, { input: { title: 'x' } }, asUser('pool'));
      const waited = performance.now() - started;
      holder.release();
      await holder.done;
      expect(errorCodes(response)).toEqual(['TRY_AGAIN']);
      // It says which limit ran out: the wait for a free connection, not a slow connect or a lost one.
      expect(response.body.errors?.[0]?.extensions).toMatchObject({ reason: 'pool', retryAfterMs: 200 });
      expect(response.body.errors?.[0]?.message).toMatch(/DB_POOL_ACQUIRE_TIMEOUT_MS/);
      await annotate(`an exhausted pool answered TRY_AGAIN after ${waited.toFixed(0)} ms (acquire timeout 200 ms)`);
    } finally {
      await small.close();
    }
  });
});
