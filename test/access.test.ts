import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredScopes } from '../src/graphql/guards.js';
import { HASURA_ROLE_OF, type AccessScope } from '../src/features/identity/access.js';
import {
  asOperator,
  asTenantAdmin,
  asUser,
  createTenant,
  createTestBackend,
  gql,
  type TestBackend,
  UNLIMITED_ANONYMOUS,
} from './support/harness.js';
import { rootFieldRequest } from './support/samples.js';

/** Every kind of caller, with the scope it should hold (null: none) and its Hasura role. */
const SESSIONS: { kind: string; headers: Record<string, string>; scope: AccessScope | null; role: string | null; refused?: true }[] = [
  { kind: 'anonymous', headers: {}, scope: null, role: null },
  { kind: 'member', headers: asUser('access'), scope: 'member', role: 'user' },
  { kind: 'tenant admin', headers: asTenantAdmin('access'), scope: 'tenantAdmin', role: 'admin' },
  { kind: 'operator', headers: asOperator(), scope: 'operator', role: 'operator' },
  // A tenant id that went missing never makes an admin the operator: the session is refused outright.
  { kind: 'an admin without a tenant', headers: { 'x-hasura-role': 'admin' }, scope: null, role: null, refused: true },
  {
    kind: 'a member without a tenant',
    headers: { 'x-hasura-role': 'user', 'x-hasura-user-id': 'm' },
    scope: null,
    role: null,
    refused: true,
  },
  { kind: "another tenant's member", headers: asUser('access-other', 'member-2'), scope: 'member', role: 'user' },
  { kind: 'a user without a user id', headers: { 'x-hasura-role': 'user', 'x-hasura-tenant-id': 'access' }, scope: null, role: 'user' },
];

const REFUSALS = ['UNAUTHENTICATED', 'FORBIDDEN'];

/** The roles each action is permitted to in the committed schema/hasura/actions.yaml. */
async function metadataRoles(): Promise<Map<string, string[]>> {
  const yaml = await readFile(new URL('../schema/hasura/actions.yaml', import.meta.url), 'utf8');
  const blocks = yaml.split(/\n  - name: /).slice(1);
  return new Map(
    blocks.map((block) => [block.split('\n')[0]!.trim(), [...block.matchAll(/^ {6}- role: (\w+)$/gm)].map((m) => m[1]!).sort()]),
  );
}

describe('who may call what: one declaration, enforced and published alike', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: UNLIMITED_ANONYMOUS });
    await createTenant(backend, 'access');
    await createTenant(backend, 'access-other');
  });
  afterAll(() => backend.close());

  it('admits exactly the declared kinds of session on every root field, and the Hasura metadata says the same', async () => {
    const schema = backend.app.schema;
    const published = await metadataRoles();
    const roots = [
      ...Object.values(schema.getQueryType()!.getFields()).map((field) => ({ operation: 'query' as const, field })),
      ...Object.values(schema.getMutationType()!.getFields()).map((field) => ({ operation: 'mutation' as const, field })),
    ];
    expect(roots.length).toBeGreaterThanOrEqual(20);
    for (const { operation, field } of roots) {
      const declared = declaredScopes(field);
      if (field.name === 'viewer') expect(declared).toBeNull();
      else expect(declared?.length, `${field.name} declares who may call it`).toBeGreaterThan(0);
      const admittedRoles = new Set<string>();
      for (const session of SESSIONS) {
        const { query, variables } = rootFieldRequest(operation, field);
        const response = await gql(backend.app.fetch, query, variables, session.headers);
        const codes = (response.body.errors ?? []).map((e) => String(e.extensions?.['code']));
        const admitted = !codes.some((code) => REFUSALS.includes(code));
        const expected = !session.refused && (declared === null || (session.scope !== null && declared.includes(session.scope)));
        if (session.refused) expect({ field: field.name, session: session.kind, codes }).toMatchObject({ codes: ['UNAUTHENTICATED'] });
        expect({ field: field.name, session: session.kind, admitted, codes }).toMatchObject({
          field: field.name,
          session: session.kind,
          admitted: expected,
        });
        expect(codes).not.toContain('INTERNAL_SERVER_ERROR');
        if (admitted && session.role !== null && declared !== null) admittedRoles.add(session.role);
      }
      if (operation === 'mutation') {
        const stale = published.has(field.name)
          ? `schema/hasura/actions.yaml gives ${field.name} other roles than the server admits: run npm run codegen (or npm run hasura:metadata)`
          : `schema/hasura/actions.yaml has no action ${field.name}: run npm run codegen (or npm run hasura:metadata)`;
        expect({ field: field.name, roles: published.get(field.name) }, stale).toEqual({
          field: field.name,
          roles: [...admittedRoles].sort(),
        });
        expect(published.get(field.name), stale).toEqual([...new Set(declared!.map((scope) => HASURA_ROLE_OF[scope]))].sort());
      }
    }
  });

  it('names who may call a field when it refuses', async () => {
    const response = await gql(
      backend.app.fetch,
      'mutation { issueCoupon(input: { campaignId: "c" }) { status } }',
      {},
      asTenantAdmin('access'),
    );
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'issueCoupon is for a member (role user with x-hasura-tenant-id and x-hasura-user-id)',
      extensions: { code: 'FORBIDDEN' },
    });
  });

  it('answers NOT_FOUND, never an internal error, to a session naming a tenant that does not exist', async () => {
    for (const field of ['joinHuddle', 'issueCoupon', 'createContract']) {
      const mutation = backend.app.schema.getMutationType()!.getFields()[field]!;
      const { query, variables } = rootFieldRequest('mutation', mutation);
      const response = await gql(backend.app.fetch, query, variables, asUser('no-such-tenant'));
      expect({ field, codes: response.body.errors?.map((e) => e.extensions?.['code']) }).toEqual({ field, codes: ['NOT_FOUND'] });
    }
    const { rows } = await backend.sql.query("select count(*)::int as n from huddle_sessions where tenant_id = 'no-such-tenant'");
    expect(rows[0].n).toBe(0);
  });
});

describe('tenant knowledge belongs to one database', () => {
  let first: TestBackend;
  let second: TestBackend;
  beforeAll(async () => {
    [first, second] = await Promise.all([createTestBackend(), createTestBackend()]);
    await createTenant(first, 'only-in-first');
  });
  afterAll(() => Promise.all([first?.close(), second?.close()]));

  it('refuses on a second backend of the process a tenant that only the first backend has seen', async () => {
    const query = 'query { tenant { id } }';
    const seen = await gql(first.app.fetch, query, {}, asTenantAdmin('only-in-first'));
    expect(seen.body).toEqual({ data: { tenant: { id: 'only-in-first' } } });
    expect(first.services.knownTenants.has('only-in-first')).toBe(true);
    const elsewhere = await gql(second.app.fetch, query, {}, asTenantAdmin('only-in-first'));
    expect(elsewhere.body.errors?.map((e) => e.extensions?.['code'])).toEqual(['NOT_FOUND']);
    expect(second.services.knownTenants.has('only-in-first')).toBe(false);
  });
});
