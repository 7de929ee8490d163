import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlState } from '../src/db/sqlstate.js';
import { RollbackAndReturn, runInTransaction } from '../src/db/transaction.js';
import { AppError } from '../src/core/errors.js';
import { createTenant, createTestBackend, type TestBackend } from './support/harness.js';

/** An error as pg reports one, with the SQLSTATE the runner decides on. */
const pgError = (code: string) => Object.assign(new Error(`simulated ${code}`), { code });

describe('the transaction runner', () => {
  let backend: TestBackend;
  const run = <T>(work: Parameters<typeof runInTransaction<T>>[3], deadline = Date.now() + 10_000, onRetry?: (state: string) => void) =>
    runInTransaction(backend.database.db, backend.services.transactions, { deadline, ...(onRetry ? { onRetry } : {}) }, work);
  const setting = async (name: string, trx: Parameters<Parameters<typeof run>[0]>[0]) =>
    (await sql<{ value: string }>`select current_setting(${name}) as value`.execute(trx)).rows[0]!.value;

  beforeAll(async () => {
    // One connection, so the session after the transaction is the one that ran it.
    backend = await createTestBackend({
      env: { DB_POOL_MAX: '1', LOCK_TIMEOUT_MS: '1234', STATEMENT_TIMEOUT_MS: '4321', IDLE_IN_TRANSACTION_TIMEOUT_MS: '5678' },
    });
    await createTenant(backend, 'runner');
  });
  afterAll(() => backend.close());

  it('sets the timeouts for its transaction only, and caps them by the deadline', async () => {
    const inside = await run(async (trx) => ({
      lock: await setting('lock_timeout', trx),
      statement: await setting('statement_timeout', trx),
      idle: await setting('idle_in_transaction_session_timeout', trx),
    }));
    expect(inside.value).toEqual({ lock: '1234ms', statement: '4321ms', idle: '5678ms' });

    const capped = await run(async (trx) => setting('statement_timeout', trx), Date.now() + 800);
    expect(Number.parseInt(capped.value, 10)).toBeLessThanOrEqual(800);

    // Back on the same (only) connection outside any transaction: the session's own values again, the
    // role's defaults (what a one-statement unit runs under), not the capped ones.
    const after = await sql<{ lock: string; statement: string; idle: string }>`
      select current_setting('lock_timeout') as lock, current_setting('statement_timeout') as statement,
             current_setting('idle_in_transaction_session_timeout') as idle`.execute(backend.database.db);
    expect(after.rows[0]).toEqual({ lock: '1234ms', statement: '4321ms', idle: '0' });
  });

  it.each([SqlState.serializationFailure, SqlState.deadlockDetected, SqlState.lockNotAvailable])(
    'reruns the whole unit of work after %s, and keeps only the attempt that committed',
    async (state) => {
      const retried: string[] = [];
      let attempt = 0;
      const result = await run(
        async (trx) => {
          attempt++;
          await sql`insert into contracts (tenant_id, title) values ('runner', ${`attempt ${attempt} of ${state}`})`.execute(trx);
          if (attempt < 3) throw pgError(state);
          return attempt;
        },
        Date.now() + 10_000,
        (s) => retried.push(s),
      );
      expect(result).toEqual({ value: 3, attempts: 3, rolledBack: false });
      expect(retried).toEqual([state, state]);
      const kept = await backend.sql.query('select title from contracts where tenant_id = $1 and title like $2', [
        'runner',
        `% of ${state}`,
      ]);
      expect(kept.rows).toEqual([{ title: `attempt 3 of ${state}` }]);
    },
  );

  it('does not retry other errors, and answers TRY_AGAIN when the attempts or the deadline run out', async () => {
    let calls = 0;
    await expect(
      run(async () => {
        calls++;
        throw pgError('23505');
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(calls).toBe(1);

    const exhausted = run(async () => {
      throw pgError(SqlState.serializationFailure);
    });
    await expect(exhausted).rejects.toBeInstanceOf(AppError);
    await expect(exhausted).rejects.toMatchObject({ code: 'TRY_AGAIN', extensions: { attempts: 8, reason: '40001' } });

    await expect(run(async () => 1, Date.now() - 1)).rejects.toMatchObject({ code: 'TRY_AGAIN', extensions: { reason: 'deadline' } });
  });

  it('rolls back and still answers with the value of RollbackAndReturn', async () => {
    const result = await run(async (trx) => {
      await sql`insert into contracts (tenant_id, title) values ('runner', 'refused')`.execute(trx);
      throw new RollbackAndReturn({ status: 'REFUSED' });
    });
    expect(result).toEqual({ value: { status: 'REFUSED' }, attempts: 1, rolledBack: true });
    expect((await backend.sql.query("select 1 from contracts where title = 'refused'")).rowCount).toBe(0);
  });

  it('builds a refusal without capturing a stack, and leaves the stack limit as it was', () => {
    const limit = Error.stackTraceLimit;
    const refusal = new RollbackAndReturn({ status: 'REFUSED' });
    expect(refusal).toBeInstanceOf(Error);
    expect(refusal.stack).not.toMatch(/\n\s+at /);
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('a fault').stack).toMatch(/\n\s+at /);
  });
});
