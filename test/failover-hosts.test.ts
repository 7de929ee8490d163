import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mutate } from '../src/client/mutate.js';
import { CreateTenantDocument } from './generated/graphql.js';
import { asOperator, createTestBackend, errorCodes, gql, type TestBackend } from './support/harness.js';
import { acceptWrites, DATABASE, PASSWORD, startServer, tenantsOn, type Server } from './support/two-servers.js';

/**
 * A multi-host DATABASE_URL with target_session_attrs=read-write, against two PostgreSQL servers
 * of this file's own: one that accepts writes and one that does not (default_transaction_read_only,
 * which a session sees exactly as it sees a hot standby: transaction_read_only is on and a write
 * fails with 25006). Then the two swap, as a failover does, while the server keeps its pool.
 * The real failover, with Patroni and replication, is test/patroni.failover.test.ts.
 */
describe('a multi-host DATABASE_URL with target_session_attrs=read-write', () => {
  let root: string;
  let first: Server;
  let second: Server;
  let backend: TestBackend;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-hosts-'));
    await chmod(root, 0o755);
    [first, second] = await Promise.all([startServer(root, 'first'), startServer(root, 'second')]);
    backend = await createTestBackend({
      databaseUrl: `postgres://postgres:${PASSWORD}@127.0.0.1:${first.postgres.port},127.0.0.1:${second.postgres.port}/${DATABASE}?target_session_attrs=read-write`,
      env: { DB_POOL_MAX: '4' },
    });
  });

  afterAll(async () => {
    await backend?.close();
    for (const server of [first, second]) {
      await server?.admin.end();
      await server?.postgres.stop();
    }
    await rm(root, { recursive: true, force: true });
  });

  const createTenant = (id: string) =>
    gql(backend.app.fetch, CreateTenantDocument, { input: { id, name: id } }, { ...asOperator(), 'idempotency-key': `key-${id}` });

  /** As a client does with TRY_AGAIN (the typed client): resent with its key until answered. */
  const createTenantResending = (id: string) =>
    mutate(
      CreateTenantDocument,
      { input: { id, name: id } },
      {
        url: 'http://test.local/graphql',
        headers: asOperator(),
        idempotencyKey: `key-${id}`,
        transport: async (url, init) => {
          const response = await backend.app.fetch(new Request(url, { method: 'POST', headers: init.headers, body: init.body }));
          return { status: response.status, headers: response.headers, body: await response.json() };
        },
      },
    );

  /** Which of the two accepts writes; each test sets what it starts from (tests run in any order). */
  async function primaryIs(server: 'first' | 'second' | 'neither') {
    await acceptWrites(first, server === 'first');
    await acceptWrites(second, server === 'second');
  }

  it('connects to the host that accepts writes, skipping the one listed first', async () => {
    await primaryIs('second');
    // A test before this one may have left both hosts failing: the first requests may hear TRY_AGAIN until a connection succeeds.
    await Promise.all(Array.from({ length: 8 }, (_, i) => createTenantResending(`before-${i}`)));
    expect(await tenantsOn(second, 'before-')).toHaveLength(8);
    expect(await tenantsOn(first, 'before-')).toEqual([]);
  });

  it('follows a switchover: a write refused on a connection to the demoted host (25006) is retried on the new primary, never answered TRY_AGAIN', async () => {
    // Every pool connection open on the second host, then the two swap.
    await primaryIs('second');
    await Promise.all(Array.from({ length: 8 }, (_, i) => createTenantResending(`warm-${i}`)));
    await primaryIs('first');
    const answers = [];
    for (let i = 0; i < 12; i++) answers.push(await createTenant(`after-${i}`));
    expect(answers.map(errorCodes).flat()).toEqual([]);
    expect(await tenantsOn(first, 'after-')).toHaveLength(12);
    expect(await tenantsOn(second, 'after-')).toEqual([]);
    // No connection of the pool stays on the host that no longer takes writes.
    const { rows } = await second.admin.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name = 'test-app' and datname = $1",
      [DATABASE],
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('when no host accepts writes, requests answer TRY_AGAIN at once, saying so without naming the machines', async ({ annotate }) => {
    await primaryIs('neither');
    try {
      const started = performance.now();
      const answer = await createTenant('nowhere');
      const tookMs = performance.now() - started;
      expect(errorCodes(answer)).toEqual(['TRY_AGAIN']);
      const error = answer.body.errors![0]!;
      expect(error.message).toMatch(/is a standby \(accepts no writes\)/);
      expect(error.message).not.toMatch(/127\.0\.0\.1|\d{4,5}/);
      expect(['connect', 'unavailable', '25006']).toContain(error.extensions?.['reason']);
      await annotate(`no writable host: TRY_AGAIN after ${tookMs.toFixed(0)} ms: ${error.message}`);
    } finally {
      await primaryIs('first');
    }
  });
});
