import { createHash } from 'node:crypto';
import { parse, print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFingerprint } from '../src/http/plugins/idempotency-key.js';
import { TryAgainError } from '../src/core/errors.js';
import { claimValues, deleteExpiredKeys, heldKey } from '../src/features/idempotency/service.js';
import { CreateCampaignDocument, CreateContractDocumentDocument, IssueCouponDocument } from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  callAction,
  createContractRow,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  type TestBackend,
} from './support/harness.js';

const TENANT = 'idem';

describe('Idempotency-Key', () => {
  let backend: TestBackend;
  let contractId: string;
  const count = async (table: string, where = 'true') =>
    (await backend.sql.query<{ n: number }>(`select count(*)::int as n from ${table} where tenant_id = $1 and ${where}`, [TENANT])).rows[0]!
      .n;
  const createDocument = (key: string | null, contract = contractId, member = 'm1') =>
    gql(
      backend.app.fetch,
      CreateContractDocumentDocument,
      { input: { contractId: contract } },
      {
        ...asUser(TENANT, member),
        ...(key === null ? {} : { 'idempotency-key': key }),
      },
    );

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, TENANT);
    contractId = await createContractRow(backend, TENANT);
  });
  afterAll(() => backend.close());

  it('replays the stored response byte for byte when the client lost the first one', async () => {
    const before = await count('contract_documents');
    const first = await createDocument('lost-response-1');
    const resent = await createDocument('lost-response-1');
    expect(first.body.errors).toBeUndefined();
    expect(resent.text).toBe(first.text);
    expect(resent.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const number = first.body.data!.createContractDocument.document.docNumber;
    expect(await count('contract_documents', `doc_number = ${number}`)).toBe(1);
    expect(await count('contract_documents')).toBe(before + 1);
  });

  it('runs 20 concurrent requests with one key once and answers all 20 the same', async () => {
    const documentsBefore = await count('contract_documents');
    const auditBefore = await count('audit_log');
    const answers = await Promise.all(Array.from({ length: 20 }, () => createDocument('twenty-at-once')));
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(answers[0]!.body.errors).toBeUndefined();
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    expect(await count('contract_documents')).toBe(documentsBefore + 1);
    expect(await count('audit_log')).toBe(auditBefore + 1);
  });

  it('refuses the same key with another input, and writes nothing', async () => {
    const other = await createContractRow(backend, TENANT, 'Other');
    await createDocument('reused-key');
    const documentsBefore = await count('contract_documents');
    const reused = await createDocument('reused-key', other);
    expect(errorCodes(reused)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    expect(await count('contract_documents')).toBe(documentsBefore);
  });

  it('answers IDEMPOTENCY_KEY_REUSED with 422 on /actions', async () => {
    const action = (contract: string) =>
      callAction(backend.app.fetch, 'createContractDocument', { contractId: contract }, asUser(TENANT, 'm1'), {
        'idempotency-key': 'action-key',
      });
    const first = await action(contractId);
    expect(first.status).toBe(200);
    const replay = await action(contractId);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(await first.text());
    const other = await action(await createContractRow(backend, TENANT));
    expect(other.status).toBe(422);
    expect(await other.json()).toMatchObject({ extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } });
  });

  it('answers a resent issueCoupon ISSUED again, not ALREADY_ISSUED', async () => {
    await gql(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'promo', name: 'Promo', discountYen: 500, budgetYen: 10_000 } },
      asTenantAdmin(TENANT),
    );
    const send = () =>
      gql(
        backend.app.fetch,
        IssueCouponDocument,
        { input: { campaignId: 'promo' } },
        { ...asUser(TENANT, 'buyer'), 'idempotency-key': 'tap-1' },
      );
    const first = await send();
    const resent = await send();
    expect(first.body.data?.issueCoupon.status).toBe('ISSUED');
    expect(resent.body.data?.issueCoupon).toEqual(first.body.data?.issueCoupon);
    const withoutKey = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'promo' } }, asUser(TENANT, 'buyer'));
    expect(withoutKey.body.data?.issueCoupon.status).toBe('ALREADY_ISSUED');
  });

  it('keeps no key for a mutation that failed after claiming it, so the resend executes', async () => {
    const missing = '5f0c5c8e-0000-4000-8000-000000000001';
    const failed = await createDocument('after-failure', missing);
    expect(errorCodes(failed)).toEqual(['NOT_FOUND']);
    expect(await count('idempotency_keys', "key = 'after-failure'")).toBe(0);
    await backend.sql.query('insert into contracts (tenant_id, id, title) values ($1, $2, $3)', [TENANT, missing, 'Late']);
    const resent = await createDocument('after-failure', missing);
    expect(resent.body.errors).toBeUndefined();
    expect(resent.headers.get('idempotent-replayed')).toBeNull();
  });

  it('forgets expired keys: the worker deletes them and the request executes afresh', async () => {
    const first = await createDocument('expiring');
    await backend.sql.query("update idempotency_keys set expires_at = now() - interval '1 second' where key = 'expiring'");
    expect(await deleteExpiredKeys(backend.database.db, 1_000)).toBeGreaterThanOrEqual(1);
    expect(await count('idempotency_keys', "key = 'expiring'")).toBe(0);
    const again = await createDocument('expiring');
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.body.data!.createContractDocument.document.docNumber).toBe(first.body.data!.createContractDocument.document.docNumber + 1);
  });

  it('skips an expired key another transaction holds, waiting for nobody, and deletes it once it is free', async () => {
    const expired = (key: string) =>
      backend.sql.query(
        `insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at)
         values ($1, 'm-expiry', 'user', $2, 'f', 'issueCoupon', '-infinity')`,
        [TENANT, key],
      );
    await expired('expiry-held');
    await expired('expiry-free');
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      await holder.query("select 1 from idempotency_keys where key = 'expiry-held' for update");
      // Waiting for the held row would end in the role's lock_timeout (55P03) instead.
      expect(await deleteExpiredKeys(backend.database.db, 1_000)).toBeGreaterThanOrEqual(1);
      expect(await count('idempotency_keys', "key like 'expiry-%'")).toBe(1);
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    expect(await deleteExpiredKeys(backend.database.db, 1_000)).toBeGreaterThanOrEqual(1);
    expect(await count('idempotency_keys', "key like 'expiry-%'")).toBe(0);
  });

  it('answers TRY_AGAIN for a key freed between its claim and the read of its answer, and replays a stored JSON null', async () => {
    const claim = claimValues(
      { tenantId: TENANT, userId: 'm-freed', role: 'user' },
      { key: 'freed', fingerprint: 'f-freed', operation: 'createContractDocument' },
      24,
    );
    const released = { constructor: TryAgainError, reason: 'key released' };
    // Deleted by the expiry pass.
    await expect(heldKey(backend.database.db, claim)).rejects.toMatchObject(released);
    // Taken by a refused request, which commits its claim expired and without an answer.
    await backend.sql.query(
      `insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at)
       values ($1, 'm-freed', 'user', 'freed', 'f-freed', 'createContractDocument', '-infinity')`,
      [TENANT],
    );
    await expect(heldKey(backend.database.db, claim)).rejects.toMatchObject(released);
    await backend.sql.query(
      "update idempotency_keys set response = 'null'::jsonb, expires_at = now() + interval '1 hour' where key = 'freed'",
    );
    expect(await heldKey(backend.database.db, claim)).toEqual({ kind: 'replay', response: null });
    expect(await heldKey(backend.database.db, { ...claim, fingerprint: 'f-other' })).toEqual({ kind: 'reused' });
  });

  it('scopes keys to (tenant, user): another member with the same key executes on their own', async () => {
    const mine = await createDocument('shared-words', contractId, 'm1');
    const theirs = await createDocument('shared-words', contractId, 'm2');
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.data!.createContractDocument.document.id).not.toBe(mine.body.data!.createContractDocument.document.id);
  });

  it("scopes keys to the role too: the same user id acting as admin is not served a member's stored response", async () => {
    const asMember = await createDocument('role-scoped', contractId, 'm9');
    const asAdmin = await gql(
      backend.app.fetch,
      CreateContractDocumentDocument,
      { input: { contractId } },
      {
        ...asTenantAdmin(TENANT),
        'x-hasura-user-id': 'm9',
        'idempotency-key': 'role-scoped',
      },
    );
    expect(asAdmin.body.errors).toBeUndefined();
    expect(asAdmin.headers.get('idempotent-replayed')).toBeNull();
    expect(asAdmin.body.data!.createContractDocument.document.id).not.toBe(asMember.body.data!.createContractDocument.document.id);
  });

  it('refuses a malformed key and a key spread over several mutations, and writes nothing', async () => {
    const before = await count('contract_documents');
    expect(errorCodes(await createDocument('x'.repeat(256)))).toEqual(['BAD_USER_INPUT']);
    expect(errorCodes(await createDocument('tab\there'))).toEqual(['BAD_USER_INPUT']);
    const two = `mutation { a: createContractDocument(input: {contractId: "${contractId}"}) { document { id } }
                           b: createContractDocument(input: {contractId: "${contractId}"}) { document { id } } }`;
    const create = (alias: string) => `${alias}: createContractDocument(input: {contractId: "${contractId}"}) { document { id } }`;
    // The same two mutations behind an inline fragment and behind a named fragment.
    const spread = [
      two,
      `mutation { ... on Mutation { ${create('a')} ${create('b')} } }`,
      `mutation { ...Both } fragment Both on Mutation { ${create('a')} ${create('b')} }`,
      `mutation { ${create('a')} ...Other } fragment Other on Mutation { ${create('b')} }`,
    ];
    for (const [i, document] of spread.entries()) {
      const response = await gql(backend.app.fetch, document, {}, { ...asUser(TENANT, 'm1'), 'idempotency-key': `two-mutations-${i}` });
      expect({ i, codes: errorCodes(response) }).toEqual({ i, codes: ['BAD_USER_INPUT'] });
      expect(response.body.errors?.[0]?.message).toMatch(/one mutation/);
    }
    expect(await count('contract_documents')).toBe(before);
    // Without a key, two mutations in one request are two units of work, as GraphQL defines.
    const unkeyed = await gql(backend.app.fetch, two, {}, asUser(TENANT, 'm1'));
    expect(unkeyed.body.errors).toBeUndefined();
    expect(await count('contract_documents')).toBe(before + 2);
  });

  it('fingerprints a request as it always has, printing each parsed document only once', () => {
    const document = parse('mutation Issue($input: IssueCouponInput!) { issueCoupon(input: $input) { status } }');
    const variables = { input: { campaignId: 'promo' } };
    // The formula keys stored before this version were made with: a resend across an upgrade still matches.
    const stored = createHash('sha256')
      .update(`Issue\n${print(document)}`)
      .update('\0')
      .update('{"input":{"campaignId":"promo"}}')
      .digest('hex');
    expect(requestFingerprint(document, 'Issue', variables)).toBe(stored);
    // Yoga's parser cache hands back the same document for the same text and never changes it; a
    // change here shows that the second fingerprint reused the first print instead of printing again.
    (document.definitions[0] as { name: { value: string } }).name.value = 'Renamed';
    expect(requestFingerprint(document, 'Issue', variables)).toBe(stored);
    expect(requestFingerprint(document, 'Issue', { input: { campaignId: 'other' } })).not.toBe(stored);
  });
});
