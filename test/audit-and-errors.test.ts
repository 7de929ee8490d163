import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuditLogDocument,
  CreateCampaignDocument,
  CreateContractDocument as CreateContract,
  CreateContractDocumentDocument,
  IssueCouponDocument,
  JoinHuddleDocument,
} from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  createTenant,
  createTestBackend,
  DATABASE_WORDS,
  errorCodes,
  gql,
  gqlOk,
  type TestBackend,
} from './support/harness.js';
import { captureLog } from './support/log-capture.js';

const TENANT = 'audited';

describe('audit trail, request ids, logs and the error contract', () => {
  let backend: TestBackend;
  const captured = captureLog();
  const auditRows = async () =>
    (
      await backend.sql.query<{ operation: string; entity_ids: string[]; actor_user_id: string | null; role: string; request_id: string }>(
        'select operation, entity_ids, actor_user_id, role, request_id from audit_log where tenant_id = $1 order by id',
        [TENANT],
      )
    ).rows;

  beforeAll(async () => {
    backend = await createTestBackend({ log: captured.logger });
    await createTenant(backend, TENANT, 1_000);
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'a', name: 'A', discountYen: 1_000, budgetYen: 10_000 } },
      asTenantAdmin(TENANT),
    );
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'b', name: 'B', discountYen: 1_000, budgetYen: 10_000 } },
      asTenantAdmin(TENANT),
    );
  });
  afterAll(() => backend.close());

  it('writes exactly one audit row per committed mutation and none for a refused or failed one', async () => {
    const before = (await auditRows()).length;
    const created = await gqlOk(
      backend.app.fetch,
      CreateContract,
      { input: { title: 'Audited' } },
      { ...asUser(TENANT, 'auditor'), 'x-request-id': 'req-audit-1' },
    );
    const contractId = created.createContract.contract.id;
    const issued = await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'a' } }, asUser(TENANT, 'auditor'));
    expect(issued.issueCoupon.status).toBe('ISSUED');
    await gqlOk(backend.app.fetch, JoinHuddleDocument, { input: { objectiveId: 'weekly' } }, asUser(TENANT, 'auditor'));

    const capped = await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'b' } }, asUser(TENANT, 'auditor'));
    expect(capped.issueCoupon.status).toBe('MONTHLY_CAP');
    const missing = await gql(
      backend.app.fetch,
      CreateContractDocumentDocument,
      { input: { contractId: '00000000-0000-4000-8000-00000000000f' } },
      asUser(TENANT, 'auditor'),
    );
    expect(errorCodes(missing)).toEqual(['NOT_FOUND']);
    const invalid = await gql(backend.app.fetch, CreateContract, { input: { title: '' } }, asUser(TENANT, 'auditor'));
    expect(errorCodes(invalid)).toEqual(['BAD_USER_INPUT']);

    const rows = (await auditRows()).slice(before);
    expect(rows.map((r) => r.operation)).toEqual(['createContract', 'issueCoupon', 'joinHuddle']);
    expect(rows[0]).toMatchObject({ entity_ids: [contractId], actor_user_id: 'auditor', role: 'user', request_id: 'req-audit-1' });
    expect(rows[1]!.entity_ids).toEqual([issued.issueCoupon.coupon!.id, 'a']);
  });

  it('pages through the audit log with limit and after, for admins only', async () => {
    // A tenant of its own with five committed mutations, whatever the other tests did.
    const tenant = 'audit-pages';
    await createTenant(backend, tenant);
    for (let i = 0; i < 5; i++) await gqlOk(backend.app.fetch, CreateContract, { input: { title: `Page ${i}` } }, asUser(tenant));
    const all = await gqlOk(backend.app.fetch, AuditLogDocument, { limit: 500 }, asTenantAdmin(tenant));
    expect(all.auditLog.map((e) => e.operation)).toEqual(Array(5).fill('createContract'));
    const first = await gqlOk(backend.app.fetch, AuditLogDocument, { limit: 2 }, asTenantAdmin(tenant));
    const second = await gqlOk(backend.app.fetch, AuditLogDocument, { limit: 2, after: first.auditLog[1]!.id }, asTenantAdmin(tenant));
    expect([...first.auditLog, ...second.auditLog].map((e) => e.id)).toEqual(all.auditLog.slice(0, 4).map((e) => e.id));
    expect(all.auditLog.every((e) => e.tenantId === tenant)).toBe(true);
    expect(errorCodes(await gql(backend.app.fetch, AuditLogDocument, {}, asUser(tenant, 'x')))).toEqual(['FORBIDDEN']);
    expect(errorCodes(await gql(backend.app.fetch, AuditLogDocument, { limit: 0 }, asTenantAdmin(tenant)))).toEqual(['BAD_USER_INPUT']);
  });

  it('takes x-request-id from the request or makes one, and returns it in the header and every error', async () => {
    const given = await gql(
      backend.app.fetch,
      CreateContract,
      { input: { title: '' } },
      { ...asUser(TENANT), 'x-request-id': 'client-chosen-42' },
    );
    expect(given.headers.get('x-request-id')).toBe('client-chosen-42');
    expect(given.body.errors?.[0]?.extensions?.['requestId']).toBe('client-chosen-42');
    const made = await gql(backend.app.fetch, CreateContract, { input: { title: '' } }, asUser(TENANT));
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(made.body.errors?.[0]?.extensions?.['requestId']).toBe(made.headers.get('x-request-id'));
    // Only 1 to 128 characters of [A-Za-z0-9._:-] are taken; anything else is replaced, never stored.
    const longest = 'a'.repeat(128);
    expect((await gql(backend.app.fetch, '{ viewer { role } }', {}, { 'x-request-id': longest })).headers.get('x-request-id')).toBe(
      longest,
    );
    for (const refused of ['bad id with spaces', 'a'.repeat(129), 'quote"d', 'semi;colon', '../../etc', 'ümlaut']) {
      const response = await gql(
        backend.app.fetch,
        CreateContract,
        { input: { title: 'Renamed request' } },
        { ...asUser(TENANT), 'x-request-id': refused },
      );
      const id = response.headers.get('x-request-id');
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const stored = (await auditRows()).at(-1)!;
      expect(stored.request_id).toBe(id);
      expect(captured.lines.some((line) => JSON.stringify(line).includes(refused))).toBe(false);
    }
  });

  it('masks an unexpected error, and its request id leads to the log line with the cause', async () => {
    // A database error the code does not expect: the table is gone for a moment.
    await backend.sql.query('alter table contracts rename to contracts_away');
    let response;
    try {
      response = await gql(
        backend.app.fetch,
        CreateContract,
        { input: { title: 'Doomed' } },
        { ...asUser(TENANT), 'x-request-id': 'req-doomed' },
      );
    } finally {
      await backend.sql.query('alter table contracts_away rename to contracts');
    }
    expect(response.body.errors).toEqual([
      expect.objectContaining({ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR', requestId: 'req-doomed' } }),
    ]);
    expect(response.text).not.toMatch(DATABASE_WORDS);
    const lines = captured.lines.filter((l) => l['requestId'] === 'req-doomed');
    const cause = lines.find((l) => l['msg'] === 'unexpected error, masked for the client');
    expect(cause).toMatchObject({ level: 'error', sqlState: '42P01', operation: 'createContract' });
    expect(JSON.stringify(cause)).toMatch(/contracts/);
    expect(lines.find((l) => l['msg'] === 'request completed')).toMatchObject({
      status: 200,
      outcome: 'INTERNAL_SERVER_ERROR',
      sqlState: '42P01',
    });
    const audit = await backend.sql.query("select 1 from audit_log where request_id = 'req-doomed'");
    expect(audit.rowCount).toBe(0);
  });

  it('logs one line per request with operation, outcome, duration and attempts, and no payloads or secrets', async () => {
    await gql(
      backend.app.fetch,
      IssueCouponDocument,
      { input: { campaignId: 'a' } },
      { ...asUser(TENANT, 'private-member-77'), 'x-request-id': 'req-logged' },
    );
    const done = captured.lines.find((l) => l['requestId'] === 'req-logged' && l['msg'] === 'request completed');
    expect(done).toMatchObject({ operation: 'issueCoupon', outcome: 'ISSUED', attempts: 1, status: 200, path: '/graphql' });
    expect(typeof done?.['durationMs']).toBe('number');
    const everything = JSON.stringify(captured.lines);
    expect(everything).not.toContain('private-member-77');
    expect(everything).not.toContain('Audited');
  });

  it('logs a client’s mistake in its request line only: no error-level line, no excerpt of the document', async () => {
    await gql(backend.app.fetch, '{ contracts(first: -1) { id } }', {}, { ...asUser(TENANT), 'x-request-id': 'req-mistake' });
    const forged = { ...asUser(TENANT), 'x-action-secret': 'not-the-secret-not-the-secret', 'x-request-id': 'req-forged' };
    await gql(backend.app.fetch, '{ contracts(first: 1) { id } }', {}, forged);
    for (const [requestId, outcome] of [
      ['req-mistake', 'BAD_USER_INPUT'],
      ['req-forged', 'UNAUTHENTICATED'],
    ]) {
      const lines = captured.lines.filter((l) => l['requestId'] === requestId);
      expect(lines.map((l) => [l['level'], l['msg']])).toEqual([['info', 'request completed']]);
      expect(lines[0]).toMatchObject({ outcome });
    }
    expect(JSON.stringify(captured.lines)).not.toContain('first: -1');
  });
});
