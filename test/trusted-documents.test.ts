import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/http/app.js';
import { CreateContractDocument as CreateContractMutation, ViewerDocument } from './generated/graphql.js';
import { asOperator, asUser, callAction, createTenant, createTestBackend, type TestBackend } from './support/harness.js';

const MANIFEST = fileURLToPath(new URL('./generated/persisted-documents.json', import.meta.url));
const SECRET = 'trusted-secret-0123456789abcdef';

/** The hash graphql-codegen's client preset embeds in each document it generates. */
const hashOf = (document: unknown) => (document as { __meta__: { hash: string } }).__meta__.hash;

describe('TRUSTED_DOCUMENTS: only the frontend’s own documents run', () => {
  let backend: TestBackend;
  let manifest: Record<string, string>;
  const contracts = async () =>
    (await backend.sql.query<{ n: number }>("select count(*)::int as n from contracts where tenant_id = 'trusted'")).rows[0]!.n;

  beforeAll(async () => {
    manifest = JSON.parse(await readFile(MANIFEST, 'utf8'));
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET, TRUSTED_DOCUMENTS: MANIFEST } });
    await createTenant(backend, 'trusted');
  });
  afterAll(() => backend.close());

  async function send(params: Record<string, unknown>, headers: Record<string, string>) {
    const response = await backend.app.fetch(
      new Request('http://test.local/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-action-secret': SECRET, ...headers },
        body: JSON.stringify(params),
      }),
    );
    return {
      status: response.status,
      body: (await response.json()) as { data?: unknown; errors?: { extensions?: Record<string, unknown> }[] },
    };
  }
  const byHash = (hash: string, variables: Record<string, unknown> = {}) => ({
    variables,
    extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
  });

  it('runs a manifest document sent by its hash, as the client preset sends it', async () => {
    const before = await contracts();
    const viewer = await send(byHash(hashOf(ViewerDocument)), asUser('trusted'));
    expect(viewer.body).toEqual({ data: { viewer: { role: 'user', tenantId: 'trusted', userId: 'member-1' } } });
    const created = await send(byHash(hashOf(CreateContractMutation), { input: { title: 'By hash' } }), asUser('trusted'));
    expect(created.body.errors).toBeUndefined();
    expect(await contracts()).toBe(before + 1);
  });

  it('takes hashes with the sha256: prefix newer client presets write, in the manifest and in requests alike', async () => {
    const prefixed = path.join(await mkdtemp(path.join(os.tmpdir(), 'trusted-')), 'persisted-documents.json');
    await writeFile(prefixed, JSON.stringify(Object.fromEntries(Object.entries(manifest).map(([hash, doc]) => [`sha256:${hash}`, doc]))));
    const newer = await createTestBackend({
      env: { ACTION_SECRET: SECRET, TRUSTED_DOCUMENTS: prefixed },
      databaseUrl: backend.databaseUrl,
    });
    try {
      for (const [app, hash] of [
        [newer.app, `sha256:${hashOf(ViewerDocument)}`],
        [newer.app, hashOf(ViewerDocument)],
        [backend.app, `sha256:${hashOf(ViewerDocument)}`],
      ] as const) {
        const response = await app.fetch(
          new Request('http://test.local/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-action-secret': SECRET, ...asUser('trusted') },
            body: JSON.stringify(byHash(hash)),
          }),
        );
        expect({ hash, body: await response.json() }).toEqual({
          hash,
          body: { data: { viewer: { role: 'user', tenantId: 'trusted', userId: 'member-1' } } },
        });
      }
    } finally {
      await newer.close();
    }
  });

  it('runs a manifest document sent in full', async () => {
    const viewer = await send({ query: manifest[hashOf(ViewerDocument)] }, asUser('trusted'));
    expect(viewer.body.data).toEqual({ viewer: { role: 'user', tenantId: 'trusted', userId: 'member-1' } });
  });

  it('refuses an ad-hoc document from a user or a tenant admin with 403, and runs none of it', async () => {
    const before = await contracts();
    for (const headers of [asUser('trusted'), { 'x-hasura-role': 'admin', 'x-hasura-tenant-id': 'trusted' }]) {
      const adHoc = await send({ query: 'mutation { createContract(input: { title: "ad hoc" }) { contract { id } } }' }, headers);
      expect(adHoc.status).toBe(403);
      expect(adHoc.body.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    }
    expect(await contracts()).toBe(before);
    const unknown = await send(byHash('0'.repeat(64)), asUser('trusted'));
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
  });

  it('refuses an ad-hoc document before it judges the caller, whatever Accept asks for', async () => {
    const adHoc = { query: '{ viewer { role } }' };
    for (const accept of ['application/json', 'application/json; charset=utf-8']) {
      // A wrong secret would be UNAUTHENTICATED; the manifest's refusal comes first, as in Yoga's order of hooks.
      const refused = await send(adHoc, { ...asUser('trusted'), 'x-action-secret': 'not-the-secret', accept });
      expect([refused.status, refused.body.errors?.[0]?.extensions?.['code']]).toEqual([403, 'FORBIDDEN']);
    }
  });

  it('lets the platform operator run any document', async () => {
    const operator = await send({ query: '{ viewer { role tenantId } }' }, asOperator());
    expect(operator.body).toEqual({ data: { viewer: { role: 'operator', tenantId: null } } });
  });

  it('keeps /actions working: its documents are the server’s own', async () => {
    const response = await callAction(backend.app.fetch, 'createContract', { title: 'From Hasura' }, asUser('trusted'), {
      'x-action-secret': SECRET,
    });
    expect(response.status).toBe(200);
  });

  it('stops at start-up on a manifest it cannot read, naming TRUSTED_DOCUMENTS', async () => {
    const services = {
      ...backend.services,
      config: { ...backend.config, edge: { ...backend.config.edge, trustedDocumentsPath: '/nonexistent/manifest.json' } },
    };
    expect(() => createApp(services)).toThrow(/TRUSTED_DOCUMENTS/);
  });
});
