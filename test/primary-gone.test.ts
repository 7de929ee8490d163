import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TryAgainError } from '../src/core/errors.js';
import { runInTransaction } from '../src/db/transaction.js';
import { CreateTenantDocument } from './generated/graphql.js';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy.js';
import { asOperator, createTestBackend, createTestDatabaseUrl, errorCodes, gql, type TestBackend } from './support/harness.js';

/**
 * "The primary went away" seen by the transaction runner: retried when the transaction provably
 * did not commit (its COMMIT was never sent), never when it might have (a COMMIT whose answer was
 * lost), and every failure names the limit that ran out.
 */
describe('the runner when the primary goes away', () => {
  let databaseUrl: string;
  let direct: pg.Pool;
  let proxy: FaultProxy;
  let backend: TestBackend;

  beforeAll(async () => {
    databaseUrl = await createTestDatabaseUrl();
    direct = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    direct.on('error', () => {});
    await direct.query("insert into tenants (id, name) values ('gone', 'Gone')");
    const target = new URL(databaseUrl);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    backend = await createTestBackend({ databaseUrl: proxy.url(databaseUrl), env: { DB_POOL_CONNECT_TIMEOUT_MS: '500' } });
  });

  afterAll(async () => {
    await proxy.close();
    await backend.close();
    await direct.end();
  });

  const contractsTitled = async (title: string) =>
    (await direct.query<{ n: number }>("select count(*)::int as n from contracts where tenant_id = 'gone' and title = $1", [title]))
      .rows[0]!.n;

  it('a connection terminated before COMMIT (57P01) is retried on a new one, and the work commits once', async () => {
    let attempts = 0;
    const run = await runInTransaction(
      backend.database.db,
      backend.services.transactions,
      { deadline: Date.now() + 10_000 },
      async (trx) => {
        attempts++;
        await sql`insert into contracts (tenant_id, title) values ('gone', 'terminated')`.execute(trx);
        if (attempts === 1) {
          const pid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
          await direct.query('select pg_terminate_backend($1)', [pid]);
          await sql`select 1`.execute(trx);
        }
        return attempts;
      },
    );
    expect(run).toMatchObject({ value: 2, attempts: 2 });
    expect(await contractsTitled('terminated')).toBe(1);
  });

  it('a connection terminated under its COMMIT is TRY_AGAIN and never rerun: the driver says the COMMIT went out', async () => {
    let attempts = 0;
    const outcome = await runInTransaction(
      backend.database.db,
      backend.services.transactions,
      { deadline: Date.now() + 10_000 },
      async (trx) => {
        attempts++;
        await sql`insert into contracts (tenant_id, title) values ('gone', 'terminated at commit')`.execute(trx);
        const pid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
        // Waits until the server process has ended: the next thing this transaction sends is its COMMIT.
        await direct.query('select pg_terminate_backend($1, 5000)', [pid]);
      },
    ).catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(TryAgainError);
    expect(outcome).toMatchObject({ attempts: 1 });
    expect((outcome as Error).message).toMatch(/same Idempotency-Key/);
    expect(attempts).toBe(1);
    // PostgreSQL rolled the transaction back with its connection; only a resend could have told.
    expect(await contractsTitled('terminated at commit')).toBe(0);
  });

  it('a COMMIT whose answer never comes is answered TRY_AGAIN and not retried: it may have committed, and here it did', async ({
    annotate,
  }) => {
    // The COMMIT's client-side limit (statement_timeout + 1 s) ends well before PostgreSQL's
    // idle_in_transaction_session_timeout would end the transaction, so the held COMMIT still lands.
    const settings = { ...backend.services.transactions, statementTimeoutMs: 500, idleInTransactionTimeoutMs: 60_000 };
    const started = performance.now();
    const outcome = await runInTransaction(backend.database.db, settings, { deadline: Date.now() + 20_000 }, async (trx) => {
      await sql`insert into contracts (tenant_id, title) values ('gone', 'lost commit')`.execute(trx);
      // The COMMIT goes into a dead path: PostgreSQL gets it only when the path heals.
      proxy.blackhole();
    }).catch((error: unknown) => error);
    const tookMs = performance.now() - started;
    proxy.heal();
    expect(outcome).toBeInstanceOf(TryAgainError);
    expect(outcome).toMatchObject({ reason: 'unanswered', attempts: 1 });
    expect((outcome as Error).message).toMatch(
      /did not confirm the commit within \d+ ms .*resend the request with the same Idempotency-Key/,
    );
    // Not the request's whole deadline: the COMMIT's own limit.
    expect(tookMs).toBeLessThan(20_000);
    await annotate(`a lost COMMIT answer: TRY_AGAIN after ${tookMs.toFixed(0)} ms (statement_timeout 500 ms + 1 s)`);
    // The held COMMIT arrived after all: exactly one row, because nothing ran the work a second time.
    for (const deadline = Date.now() + 10_000; (await contractsTitled('lost commit')) === 0 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 50));
    expect(await contractsTitled('lost commit')).toBe(1);
  });

  it('a new connection that does not complete in time names DB_POOL_CONNECT_TIMEOUT_MS', async () => {
    const fresh = await createTestBackend({
      databaseUrl: proxy.url(databaseUrl),
      env: { DB_POOL_CONNECT_TIMEOUT_MS: '300', REQUEST_DEADLINE_MS: '2000' },
    });
    proxy.blackhole();
    try {
      const answer = await gql(fresh.app.fetch, CreateTenantDocument, { input: { id: 'never', name: 'Never' } }, asOperator());
      expect(errorCodes(answer)).toEqual(['TRY_AGAIN']);
      const error = answer.body.errors![0]!;
      expect(['connect', 'unavailable']).toContain(error.extensions?.['reason']);
      expect(error.message).toMatch(/did not answer within DB_POOL_CONNECT_TIMEOUT_MS/);
    } finally {
      proxy.heal();
      await fresh.close();
    }
  });
});
