import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/core/config.js';
import { CreateContractDocument as CreateContract, ViewerDocument } from './generated/graphql.js';
import { asUser, callAction, createTenant, createTestBackend, errorCodes, gql, type TestBackend } from './support/harness.js';

const SECRET = 'action-secret-for-tests-0123456789';
/** Anything but development or test also needs a database of its own. */
const DATABASE_URL = 'postgres://app@db/app';
const JWT_KEY = 'jwt-key-for-tests-0123456789abcdef0123456789';
const JWT_SECRET = JSON.stringify({ type: 'HS256', key: JWT_KEY });

async function token(claims: Record<string, unknown>, options: { key?: string; expiresIn?: string } = {}) {
  return new SignJWT({ 'https://hasura.io/jwt/claims': claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? '5m')
    .sign(new TextEncoder().encode(options.key ?? JWT_KEY));
}

const memberClaims = {
  'x-hasura-allowed-roles': ['user', 'admin'],
  'x-hasura-default-role': 'user',
  'x-hasura-user-id': 'member-7',
  'x-hasura-tenant-id': 'id-tenant',
};

describe('identity', () => {
  let backend: TestBackend;
  const contracts = async () =>
    (await backend.sql.query<{ n: number }>("select count(*)::int as n from contracts where tenant_id = 'id-tenant'")).rows[0]!.n;
  const create = (headers: Record<string, string>) =>
    gql(backend.app.fetch, CreateContract, { input: { title: 'From identity test' } }, headers);

  beforeAll(async () => {
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET, JWT_SECRET } });
    await createTenant(backend, 'id-tenant');
  });
  afterAll(() => backend.close());

  it('refuses forged x-hasura-* headers without the secret, and writes nothing', async () => {
    const before = await contracts();
    expect(errorCodes(await create(asUser('id-tenant')))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await create({ ...asUser('id-tenant'), 'x-action-secret': 'wrong-secret-wrong-secret' }))).toEqual([
      'UNAUTHENTICATED',
    ]);
    expect(await contracts()).toBe(before);
  });

  it('trusts x-hasura-* headers that come with the secret (Hasura as a Remote Schema)', async () => {
    const response = await create({ ...asUser('id-tenant'), 'x-action-secret': SECRET });
    expect(response.body.errors).toBeUndefined();
  });

  it('refuses an empty or null tenant id, never reading it as the platform operator, and a variable given twice', async () => {
    const createTenantAs = (headers: Record<string, string>, id: string) =>
      gql(backend.app.fetch, `mutation { createTenant(input: { id: "${id}", name: "n" }) { tenant { id } } }`, {}, headers);
    const tenants = async () =>
      (await backend.sql.query<{ n: number }>("select count(*)::int as n from tenants where id like 'empty-%'")).rows[0]!.n;
    const emptyTenantAdmin = { 'x-action-secret': SECRET, 'x-hasura-role': 'admin', 'x-hasura-tenant-id': '' };
    expect(errorCodes(await createTenantAs(emptyTenantAdmin, 'empty-header'))).toEqual(['UNAUTHENTICATED']);
    const emptyClaim = await token({ ...memberClaims, 'x-hasura-default-role': 'admin', 'x-hasura-tenant-id': '' });
    expect(errorCodes(await createTenantAs({ authorization: `Bearer ${emptyClaim}` }, 'empty-claim'))).toEqual(['UNAUTHENTICATED']);
    const action = (name: string, input: Record<string, unknown>, sessionVariables: Record<string, unknown>) =>
      callAction(backend.app.fetch, name, input, sessionVariables, { 'x-action-secret': SECRET });
    for (const [id, tenant] of [
      ['empty-null', null],
      ['empty-string', ''],
    ] as const) {
      const refused = await action('createTenant', { id, name: 'n' }, { 'x-hasura-role': 'admin', 'x-hasura-tenant-id': tenant });
      expect({ id, status: refused.status }).toEqual({ id, status: 401 });
    }
    const twice = await action('createContract', { title: 'twice' }, { ...asUser('id-tenant'), 'X-Hasura-Tenant-Id': 'other-tenant' });
    expect(twice.status).toBe(401);
    expect(await tenants()).toBe(0);
  });

  it('answers an anonymous caller with null viewer and refuses it a mutation', async () => {
    const viewer = await gql(backend.app.fetch, ViewerDocument, {});
    expect(viewer.body.data?.viewer).toBeNull();
    expect(errorCodes(await create({}))).toEqual(['UNAUTHENTICATED']);
  });

  it('accepts a Hasura JWT and takes the default role', async () => {
    const response = await gql(backend.app.fetch, ViewerDocument, {}, { authorization: `Bearer ${await token(memberClaims)}` });
    expect(response.body.data?.viewer).toEqual({ role: 'user', tenantId: 'id-tenant', userId: 'member-7' });
  });

  it('refuses a wrong x-action-secret whatever else the request carries, a valid JWT included', async () => {
    const bearer = `Bearer ${await token(memberClaims)}`;
    const before = await contracts();
    for (const headers of [
      { authorization: bearer, 'x-action-secret': 'wrong-secret-wrong-secret' },
      { authorization: bearer, 'x-action-secret': '' },
    ]) {
      const viewer = await gql(backend.app.fetch, ViewerDocument, {}, headers);
      expect({ headers, codes: errorCodes(viewer), data: viewer.body.data ?? null }).toEqual({
        headers,
        codes: ['UNAUTHENTICATED'],
        data: null,
      });
      expect(errorCodes(await create(headers))).toEqual(['UNAUTHENTICATED']);
    }
    expect(await contracts()).toBe(before);
    // The right secret beside the JWT changes nothing: the token decides who is calling.
    const both = await gql(backend.app.fetch, ViewerDocument, {}, { authorization: bearer, 'x-action-secret': SECRET });
    expect(both.body.data?.viewer).toEqual({ role: 'user', tenantId: 'id-tenant', userId: 'member-7' });
  });

  it('lets x-hasura-role pick an allowed role and refuses any other', async () => {
    const bearer = `Bearer ${await token(memberClaims)}`;
    const admin = await gql(backend.app.fetch, ViewerDocument, {}, { authorization: bearer, 'x-hasura-role': 'admin' });
    expect(admin.body.data?.viewer?.role).toBe('admin');
    const refused = await gql(backend.app.fetch, ViewerDocument, {}, { authorization: bearer, 'x-hasura-role': 'superuser' });
    expect(errorCodes(refused)).toEqual(['FORBIDDEN']);
  });

  it('refuses a JWT with a bad signature, an expired one, and one without Hasura claims', async () => {
    const badSignature = await token(memberClaims, { key: 'another-key-another-key-another-key-1234' });
    const expired = await token(memberClaims, { expiresIn: '-1m' });
    const noClaims = await new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(JWT_KEY));
    for (const jwt of [badSignature, expired, noClaims, 'not-a-jwt']) {
      const before = await contracts();
      expect(errorCodes(await create({ authorization: `Bearer ${jwt}` }))).toEqual(['UNAUTHENTICATED']);
      expect(await contracts()).toBe(before);
    }
  });

  it('does not let a JWT session be widened by x-hasura-* headers', async () => {
    const response = await gql(
      backend.app.fetch,
      ViewerDocument,
      {},
      { authorization: `Bearer ${await token(memberClaims)}`, 'x-hasura-tenant-id': 'other', 'x-hasura-user-id': 'someone' },
    );
    expect(response.body.data?.viewer).toEqual({ role: 'user', tenantId: 'id-tenant', userId: 'member-7' });
  });
});

describe('configuration', () => {
  it('has sensible defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      server: { port: 4000 },
      database: { poolMax: 10, url: null },
      coupons: { businessTimeZone: 'Asia/Tokyo' },
      identity: { jwt: null },
    });
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['DB_POOL_MAX', '0'],
    ['DB_POOL_ACQUIRE_TIMEOUT_MS', '-5'],
    ['LOCK_TIMEOUT_MS', '1.5'],
    ['STATEMENT_TIMEOUT_MS', 'soon'],
    ['REQUEST_DEADLINE_MS', '60000'],
    ['DATABASE_URL', 'mysql://localhost/db'],
    ['DATABASE_URL', 'not a url'],
    ['JWT_SECRET', '{"type":"HS256","key":"short"}'],
    ['JWT_SECRET', '{"type":"RS256","key":"0123456789abcdef0123456789abcdef"}'],
    ['JWT_SECRET', 'plain text'],
    ['BUSINESS_TIME_ZONE', 'Mars/Olympus'],
    ['NODE_ENV', 'not an environment'],
    ['HOST', 'no spaces please'],
    ['ACTION_SECRET', 'short'],
  ])('stops on %s=%s with a message naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}(\\.[\\w.-]+)?: `));
  });

  it('runs dev mode (no secret, no JWT key) only with NODE_ENV unset, development or test', () => {
    for (const nodeEnv of ['production', 'staging', 'prod']) {
      expect(() => loadConfig({ NODE_ENV: nodeEnv })).toThrow(
        new RegExp(`^ACTION_SECRET: NODE_ENV=${nodeEnv} needs ACTION_SECRET or JWT_SECRET`),
      );
      expect(loadConfig({ NODE_ENV: nodeEnv, ACTION_SECRET: SECRET, DATABASE_URL })).toMatchObject({
        identity: { actionSecret: SECRET },
        process: { development: false },
      });
    }
    for (const env of [{}, { NODE_ENV: 'development' }, { NODE_ENV: 'test' }]) expect(loadConfig(env).process.development).toBe(true);
  });

  it('binds dev mode to this machine only, and anything else to every interface unless HOST says otherwise', () => {
    expect(loadConfig({}).server.host).toBe('127.0.0.1');
    expect(loadConfig({ ACTION_SECRET: SECRET }).server.host).toBe('0.0.0.0');
    expect(loadConfig({ NODE_ENV: 'production', ACTION_SECRET: SECRET, DATABASE_URL }).server.host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '0.0.0.0' }).server.host).toBe('0.0.0.0');
    expect(loadConfig({ ACTION_SECRET: SECRET, HOST: '10.0.0.5' }).server.host).toBe('10.0.0.5');
  });
});
