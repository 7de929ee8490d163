import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerCheck } from '../src/features/coupons/ledger.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { createLogger } from '../src/core/logger.js';
import { CreateCampaignDocument, CreateContractDocumentDocument, IssueCouponDocument } from './generated/graphql.js';
import { LoadClient, runReleasedTogether, type GraphQLReply } from './load/client.js';
import { asTenantAdmin, asUser, createTestBackend, gqlOk, serveOverHttp, type TestBackend } from './support/harness.js';
import { migrateDatabaseAt } from './support/tool-database.js';

const TENANT = 'faulty';
const REQUESTS = 600;
const CONCURRENCY = 16;
/** How many times the test resends what answered TRY_AGAIN, as a retrying client would, before it counts a key as lost. */
const RESEND_ROUNDS = 5;

interface Sent {
  kind: 'document' | 'coupon';
  key: string;
  member: string;
  reply: GraphQLReply;
}

/**
 * The database goes away under load, twice: first every connection of the app is terminated
 * (pg_terminate_backend), then the server itself restarts. This file runs a PostgreSQL of its own
 * so that restarting it disturbs no other test file.
 */
describe('faults: the database drops connections and restarts during a concurrent run', () => {
  let dataRoot: string;
  let postgres: EmbeddedPostgres;
  let backend: TestBackend;
  let contractId: string;

  beforeAll(async () => {
    dataRoot = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-faults-'));
    await chmod(dataRoot, 0o755);
    const log = createLogger('silent');
    postgres = await startEmbeddedPostgres({ dataDir: path.join(dataRoot, 'data'), port: 0, log, ephemeral: true });
    const url = postgres.connectionString('postgres');
    await migrateDatabaseAt(url);
    backend = await createTestBackend({
      databaseUrl: url,
      env: { DB_POOL_MAX: '8', DB_POOL_ACQUIRE_TIMEOUT_MS: '2000', REQUEST_DEADLINE_MS: '5000' },
    });
    await backend.sql.query("insert into tenants (id, name, monthly_cap_yen) values ($1, 'Faulty', 1000000)", [TENANT]);
    contractId = (
      await backend.sql.query<{ id: string }>("insert into contracts (tenant_id, title) values ($1, 'C') returning id", [TENANT])
    ).rows[0]!.id;
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'big', name: 'Big', discountYen: 100, budgetYen: 10_000_000 } },
      asTenantAdmin(TENANT),
    );
  });

  afterAll(async () => {
    await backend?.close();
    await postgres?.stop();
    await rm(dataRoot, { recursive: true, force: true });
  });

  it('ends every request in flight with success or TRY_AGAIN, loses nothing, and recovers by itself', async ({ annotate }) => {
    const { url, server } = await serveOverHttp(backend);
    const client = new LoadClient(url, CONCURRENCY);
    await client.open();
    const ready = async () => (await backend.app.fetch(new Request('http://test.local/ready'))).status;
    const send = (index: number, attempt: string) => async (): Promise<Sent> => {
      const kind = index % 2 === 0 ? 'document' : 'coupon';
      const member = `member-${index}`;
      const key = `fault-${index}`;
      const headers = { ...asUser(TENANT, member), 'idempotency-key': key, 'x-request-id': `${key}-${attempt}` };
      const reply =
        kind === 'document'
          ? await client.graphql(print(CreateContractDocumentDocument), { input: { contractId } }, headers)
          : await client.graphql(print(IssueCouponDocument), { input: { campaignId: 'big' } }, headers);
      return { kind, key, member, reply };
    };

    let completed = 0;
    const readyDuringOutage: number[] = [];
    const faults = (async () => {
      while (completed < REQUESTS / 6) await sleep(5);
      await backend.sql.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'test-app'");
      while (completed < REQUESTS / 2) await sleep(5);
      await postgres.stop();
      readyDuringOutage.push(await ready());
      await sleep(300);
      await postgres.restart();
    })();
    const replies = await runReleasedTogether(
      Array.from({ length: REQUESTS }, (_, i) => async () => {
        const sent = await send(i, 'first')();
        completed++;
        return sent;
      }),
      CONCURRENCY,
    );
    await faults;

    const outcome = (s: Sent) => String(s.reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');
    const counts: Record<string, number> = {};
    for (const s of replies) counts[outcome(s)] = (counts[outcome(s)] ?? 0) + 1;
    await annotate(
      `faults: ${REQUESTS} requests at ${CONCURRENCY} clients; outcomes ${JSON.stringify(counts)}; /ready during the outage ${readyDuringOutage}`,
    );
    expect(Object.keys(counts).every((code) => code === 'OK' || code === 'TRY_AGAIN')).toBe(true);
    expect(counts['TRY_AGAIN']).toBeGreaterThan(0);
    expect(readyDuringOutage).toEqual([503]);

    // Recovered without a restart of the server: ready again, and new requests succeed.
    for (const deadline = Date.now() + 10_000; (await ready()) !== 200 && Date.now() < deadline;) await sleep(100);
    expect(await ready()).toBe(200);

    // Every answer of "created" exists exactly once.
    const answeredDocuments = replies.filter((s) => s.kind === 'document' && outcome(s) === 'OK');
    for (const s of answeredDocuments) {
      const id = (s.reply.body.data?.['createContractDocument'] as { document: { id: string } }).document.id;
      expect((await backend.sql.query('select 1 from contract_documents where id = $1', [id])).rowCount).toBe(1);
    }
    const answeredCoupons = replies.filter((s) => s.kind === 'coupon' && outcome(s) === 'OK');
    for (const s of answeredCoupons) {
      expect((s.reply.body.data?.['issueCoupon'] as { status: string }).status).toBe('ISSUED');
      const held = await backend.sql.query('select 1 from coupons where tenant_id = $1 and member_id = $2', [TENANT, s.member]);
      expect(held.rowCount).toBe(1);
    }

    // Resending every TRY_AGAIN with its key, as a client does (a resend released with a hundred
    // others on a busy machine may itself hear TRY_AGAIN), completes the run exactly once per key.
    let unfinished = replies.filter((s) => outcome(s) === 'TRY_AGAIN');
    for (let round = 1; unfinished.length > 0 && round <= RESEND_ROUNDS; round++) {
      const resent = await runReleasedTogether(
        unfinished.map((s) => send(Number(s.key.slice('fault-'.length)), `resend-${round}`)),
        CONCURRENCY,
      );
      expect(resent.filter((s) => !['OK', 'TRY_AGAIN'].includes(outcome(s))).map(outcome)).toEqual([]);
      unfinished = resent.filter((s) => outcome(s) === 'TRY_AGAIN');
    }
    expect(unfinished.map((s) => s.key)).toEqual([]);
    const documents = await backend.sql.query<{ doc_number: number }>(
      'select doc_number from contract_documents where tenant_id = $1 order by 1',
      [TENANT],
    );
    expect(documents.rows.map((r) => r.doc_number)).toEqual(Array.from({ length: REQUESTS / 2 }, (_, i) => 10_000_000 + i));
    const coupons = await backend.sql.query<{ n: number }>('select count(*)::int as n from coupons where tenant_id = $1', [TENANT]);
    expect(coupons.rows[0]!.n).toBe(REQUESTS / 2);
    const report = await ledgerCheck(backend.database.db, TENANT);
    expect(report.ok).toBe(true);
    const events = await backend.sql.query<{ n: number }>('select count(*)::int as n from outbox_events where tenant_id = $1', [TENANT]);
    expect(events.rows[0]!.n).toBe(REQUESTS / 2);

    client.close();
    await server.close();
  });
});
