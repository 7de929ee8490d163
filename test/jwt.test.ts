import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { exportJWK, exportPKCS8, exportSPKI, generateKeyPair, importPKCS8, SignJWT, type JWK, type JWTPayload, type KeyLike } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type AppConfig, type JwtConfig } from '../src/core/config.js';
import { AppError } from '../src/core/errors.js';
import { createJwtVerifier, type JwtVerifier } from '../src/features/identity/jwt.js';
import { resolveSession } from '../src/features/identity/session.js';
import { createLogger } from '../src/core/logger.js';
import { ViewerDocument } from './generated/graphql.js';
import { createTenant, createTestBackend, errorCodes, gql, type TestBackend } from './support/harness.js';
import { listenOnLoopback } from './support/ports.js';

const NAMESPACE = 'https://hasura.io/jwt/claims';
const SHARED_SECRET = 'jwt-key-for-tests-0123456789abcdef0123456789';
const member = {
  'x-hasura-allowed-roles': ['user', 'admin'],
  'x-hasura-default-role': 'user',
  'x-hasura-user-id': 'member-7',
  'x-hasura-tenant-id': 'jwt-tenant',
};
const memberSession = { role: 'user', userId: 'member-7', tenantId: 'jwt-tenant' };
const hs256 = { type: 'HS256', key: SHARED_SECRET };
const secretKey = new TextEncoder().encode(SHARED_SECRET);

interface SignOptions {
  alg?: string;
  kid?: string;
  /** null: no exp claim at all. */
  expiresIn?: string | number | null;
  audience?: string;
  issuer?: string;
}

function sign(payload: JWTPayload, key: KeyLike | Uint8Array, options: SignOptions = {}): Promise<string> {
  const { alg = 'HS256', kid, expiresIn = '5m', audience, issuer } = options;
  const jwt = new SignJWT(payload).setProtectedHeader(kid === undefined ? { alg } : { alg, kid }).setIssuedAt();
  if (expiresIn !== null) jwt.setExpirationTime(expiresIn);
  if (audience !== undefined) jwt.setAudience(audience);
  if (issuer !== undefined) jwt.setIssuer(issuer);
  return jwt.sign(key);
}

const memberToken = (key: KeyLike | Uint8Array, options?: SignOptions) => sign({ [NAMESPACE]: member }, key, options);
const configWith = (secret: unknown): AppConfig => loadConfig({ NODE_ENV: 'test', JWT_SECRET: JSON.stringify(secret) });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** The session a request with these headers gets, or the code it is refused with. */
async function sessionOrCode(config: AppConfig, headers: Record<string, string>): Promise<unknown> {
  return resolveSession(new Headers(headers), config).catch(codeOf);
}

function codeOf(error: unknown): unknown {
  if (error instanceof AppError) return error.extensions['code'];
  throw error;
}

const rsa = await generateKeyPair('RS256', { extractable: true });
const p256 = await generateKeyPair('ES256', { extractable: true });
const rsaPem = await exportSPKI(rsa.publicKey);
const rsaJwk = await exportJWK(rsa.publicKey);
// Keys that fit no configured type, for the configuration errors below.
const p256Pem = await exportSPKI(p256.publicKey);
const p256Jwk = await exportJWK(p256.publicKey);
const p384Pem = await exportSPKI((await generateKeyPair('ES384', { extractable: true })).publicKey);
const rsa1024Pem = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' });
const rsaPrivatePem = await exportPKCS8(rsa.privateKey);
const rsaPrivateJwk = await exportJWK(rsa.privateKey);

describe('JWT_SECRET with a key', () => {
  it.each(['HS256', 'HS384', 'HS512'])('%s verifies with the shared secret and refuses another secret', async (alg) => {
    const config = configWith({ type: alg, key: SHARED_SECRET });
    expect(await sessionOrCode(config, bearer(await memberToken(secretKey, { alg })))).toEqual(memberSession);
    const otherSecret = new TextEncoder().encode('another-secret-another-secret-another-secret');
    expect(await sessionOrCode(config, bearer(await memberToken(otherSecret, { alg })))).toBe('UNAUTHENTICATED');
  });

  const forms = {
    PEM: (key: KeyLike) => exportSPKI(key),
    'JWK object': (key: KeyLike) => exportJWK(key),
    'JWK string': async (key: KeyLike) => JSON.stringify(await exportJWK(key)),
  };
  it.each([
    ['RS256', 'RS256', 'PEM'],
    ['RS384', 'RS384', 'JWK object'],
    ['RS512', 'RS512', 'JWK string'],
    ['ES256', 'ES256', 'PEM'],
    ['ES384', 'ES384', 'JWK object'],
    ['ES512', 'ES512', 'JWK string'],
    ['Ed25519', 'EdDSA', 'PEM'],
    ['Ed25519', 'EdDSA', 'JWK object'],
  ] as const)('%s (alg %s) verifies with a %s public key and refuses another key', async (type, alg, form) => {
    const signer = await generateKeyPair(alg, { extractable: true });
    const config = configWith({ type, key: await forms[form](signer.publicKey) });
    expect(await sessionOrCode(config, bearer(await memberToken(signer.privateKey, { alg })))).toEqual(memberSession);
    const stranger = await generateKeyPair(alg);
    expect(await sessionOrCode(config, bearer(await memberToken(stranger.privateKey, { alg })))).toBe('UNAUTHENTICATED');
  });

  it('RS256 verifies with a PEM X.509 certificate', async () => {
    // A self-signed certificate and its key, made for these tests only.
    const fixture = (name: string) => readFileSync(new URL(`./fixtures/jwt/${name}`, import.meta.url), 'utf8');
    const signingKey = await importPKCS8(fixture('certificate-key.pem'), 'RS256');
    const config = configWith({ type: 'RS256', key: fixture('certificate.pem') });
    expect(await sessionOrCode(config, bearer(await memberToken(signingKey, { alg: 'RS256' })))).toEqual(memberSession);
    expect(await sessionOrCode(config, bearer(await memberToken(rsa.privateKey, { alg: 'RS256' })))).toBe('UNAUTHENTICATED');
  });

  it('refuses a token whose alg is not the configured type (the public key used as an HMAC secret)', async () => {
    const config = configWith({ type: 'RS256', key: rsaPem });
    const forged = await memberToken(new TextEncoder().encode(rsaPem), { alg: 'HS256' });
    expect(await sessionOrCode(config, bearer(forged))).toBe('UNAUTHENTICATED');
  });
});

describe('JWT_SECRET claims checks', () => {
  const refusal = (config: AppConfig, token: string) =>
    resolveSession(new Headers(bearer(token)), config).then(
      () => null,
      (error: AppError) => ({ code: error.extensions['code'], message: error.message }),
    );

  it('requires exp: a token without it is refused', async () => {
    const config = configWith(hs256);
    expect(await refusal(config, await memberToken(secretKey, { expiresIn: null }))).toEqual({
      code: 'UNAUTHENTICATED',
      message: 'The JWT has no expiry (exp)',
    });
    expect(await refusal(config, await memberToken(secretKey))).toBeNull();
  });

  it('checks audience (a string or a list) and issuer, and says no more than "invalid"', async () => {
    const config = configWith({ ...hs256, audience: ['api', 'console'], issuer: 'https://auth.example.com/' });
    const token = (audience: string | undefined, issuer: string | undefined) =>
      memberToken(secretKey, { ...(audience ? { audience } : {}), ...(issuer ? { issuer } : {}) });
    expect(await refusal(config, await token('console', 'https://auth.example.com/'))).toBeNull();
    const invalid = { code: 'UNAUTHENTICATED', message: 'The JWT is invalid' };
    expect(await refusal(config, await token('elsewhere', 'https://auth.example.com/'))).toEqual(invalid);
    expect(await refusal(config, await token(undefined, 'https://auth.example.com/'))).toEqual(invalid);
    expect(await refusal(config, await token('api', 'https://evil.example.com/'))).toEqual(invalid);
    expect(await refusal(configWith({ ...hs256, audience: 'api' }), await token('api', undefined))).toBeNull();
  });

  it('tolerates allowed_skew seconds of clock difference on exp, and no more', async () => {
    const expiredSecondsAgo = (seconds: number) => memberToken(secretKey, { expiresIn: Math.floor(Date.now() / 1000) - seconds });
    const lenient = configWith({ ...hs256, allowed_skew: 60 });
    expect(await refusal(lenient, await expiredSecondsAgo(30))).toBeNull();
    expect(await refusal(lenient, await expiredSecondsAgo(90))).toEqual({ code: 'UNAUTHENTICATED', message: 'The JWT has expired' });
    expect(await refusal(configWith(hs256), await expiredSecondsAgo(30))).toEqual({
      code: 'UNAUTHENTICATED',
      message: 'The JWT has expired',
    });
  });
});

describe('JWT_SECRET claims location', () => {
  it('reads claims_namespace', async () => {
    const config = configWith({ ...hs256, claims_namespace: 'https://example.com/claims' });
    expect(await sessionOrCode(config, bearer(await sign({ 'https://example.com/claims': member }, secretKey)))).toEqual(memberSession);
    expect(await sessionOrCode(config, bearer(await memberToken(secretKey)))).toBe('UNAUTHENTICATED');
  });

  it("reads claims_namespace_path, with $['dotted.name'] steps and $ for the whole payload", async () => {
    const nested = configWith({ ...hs256, claims_namespace_path: "$.app['hasura.io'].claims" });
    const token = await sign({ app: { 'hasura.io': { claims: member } } }, secretKey);
    expect(await sessionOrCode(nested, bearer(token))).toEqual(memberSession);
    expect(await sessionOrCode(nested, bearer(await memberToken(secretKey)))).toBe('UNAUTHENTICATED');
    const root = configWith({ ...hs256, claims_namespace_path: '$' });
    expect(await sessionOrCode(root, bearer(await sign(member, secretKey)))).toEqual(memberSession);
  });

  it('reads stringified_json claims: the claims are a JSON string', async () => {
    const stringified = await sign({ [NAMESPACE]: JSON.stringify(member) }, secretKey);
    expect(await sessionOrCode(configWith({ ...hs256, claims_format: 'stringified_json' }), bearer(stringified))).toEqual(memberSession);
    expect(await sessionOrCode(configWith(hs256), bearer(stringified))).toBe('UNAUTHENTICATED');
    expect(await sessionOrCode(configWith({ ...hs256, claims_format: 'stringified_json' }), bearer(await memberToken(secretKey)))).toBe(
      'UNAUTHENTICATED',
    );
  });

  it('builds the session from claims_map: paths, defaults and literal values', async () => {
    const config = configWith({
      ...hs256,
      claims_map: {
        'x-hasura-allowed-roles': { path: '$.roles' },
        'x-hasura-default-role': { path: '$.primary_role', default: 'user' },
        'x-hasura-user-id': { path: '$.sub' },
        'X-Hasura-Tenant-Id': { path: "$.orgs[0]['tenant.id']" },
      },
    });
    const payload = { sub: 'member-7', roles: ['user', 'admin'], orgs: [{ 'tenant.id': 'jwt-tenant' }] };
    expect(await sessionOrCode(config, bearer(await sign(payload, secretKey)))).toEqual(memberSession);
    const admin = await sign({ ...payload, primary_role: 'admin' }, secretKey);
    expect(await sessionOrCode(config, bearer(admin))).toEqual({ ...memberSession, role: 'admin' });
    // The x-hasura-role header still picks among the mapped allowed roles.
    expect(await sessionOrCode(config, { ...bearer(await sign(payload, secretKey)), 'x-hasura-role': 'admin' })).toMatchObject({
      role: 'admin',
    });

    const literal = configWith({
      ...hs256,
      claims_map: {
        'x-hasura-allowed-roles': ['user'],
        'x-hasura-default-role': 'user',
        'x-hasura-user-id': { path: '$.sub' },
        'x-hasura-tenant-id': 'literal-tenant',
      },
    });
    expect(await sessionOrCode(literal, bearer(await sign({ sub: 'member-9' }, secretKey)))).toEqual({
      role: 'user',
      userId: 'member-9',
      tenantId: 'literal-tenant',
    });
    // A tenant the claims leave out grants nothing: the session is refused, never tenantless.
    const noTenant = configWith({
      ...hs256,
      claims_map: { 'x-hasura-allowed-roles': ['user', 'admin'], 'x-hasura-default-role': 'admin', 'x-hasura-user-id': { path: '$.sub' } },
    });
    expect(await sessionOrCode(noTenant, bearer(await sign({ sub: 'member-9' }, secretKey)))).toBe('UNAUTHENTICATED');
  });

  it('reads the token from the cookie named by header, and only there', async () => {
    const config = configWith({ ...hs256, header: { type: 'Cookie', name: 'session' } });
    const token = await memberToken(secretKey);
    expect(await sessionOrCode(config, { cookie: `theme=dark; session=${token}` })).toEqual(memberSession);
    expect(await sessionOrCode(config, { cookie: 'theme=dark' })).toBeNull();
    expect(await sessionOrCode(config, bearer(token))).toBe('UNAUTHENTICATED');
    expect(await sessionOrCode(configWith(hs256), { cookie: `session=${token}` })).toBeNull();
  });
});

interface KeyServer {
  url: string;
  /** Requests the server has answered (or left hanging). */
  fetches: number;
  keys: JWK[];
  headers: Record<string, string>;
  status: number;
  /** Accept requests and never answer them. */
  hang: boolean;
  close(): Promise<void>;
}

/** An identity provider's JWKS endpoint on a real socket. */
async function startKeyServer(): Promise<KeyServer> {
  const server: Server = createServer((_request, response) => {
    state.fetches += 1;
    if (state.hang) return;
    response.writeHead(state.status, { 'content-type': 'application/json', ...state.headers });
    response.end(JSON.stringify({ keys: state.keys }));
  });
  const { origin, close } = await listenOnLoopback(server);
  const state: KeyServer = {
    url: `${origin}/.well-known/jwks.json`,
    fetches: 0,
    keys: [],
    headers: {},
    status: 200,
    hang: false,
    close,
  };
  return state;
}

/** A signing key as a provider publishes it: its public JWK with kid, alg and use. */
async function providerKey(kid: string, alg = 'RS256') {
  const pair = await generateKeyPair(alg, { extractable: true });
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid, alg, use: 'sig' };
  const signToken = (options: SignOptions = {}, payload: JWTPayload = { [NAMESPACE]: member }) =>
    sign(payload, pair.privateKey, { alg, kid, ...options });
  return { jwk, sign: signToken };
}

async function outcomeOf(verifier: JwtVerifier, token: string, log?: ReturnType<typeof createLogger>): Promise<unknown> {
  return verifier.hasuraClaims(token, log).then(() => 'OK', codeOf);
}

describe('JWT_SECRET with jwk_url', () => {
  let server: KeyServer;
  let clock = Date.now();
  const now = () => clock;
  const COOLDOWN_MS = 10_000;
  const verifierFor = (secret: Record<string, unknown> = {}) =>
    createJwtVerifier(configWith({ jwk_url: server.url, ...secret }).identity.jwt as JwtConfig, {
      now,
      cooldownMs: COOLDOWN_MS,
      timeoutMs: 300,
    });

  beforeAll(async () => {
    server = await startKeyServer();
  });
  afterEach(() => {
    Object.assign(server, { fetches: 0, keys: [], headers: {}, status: 200, hang: false });
    clock = Date.now();
  });
  afterAll(() => server.close());

  it("keeps the keys for the response's Cache-Control max-age, then fetches them again", async () => {
    const key = await providerKey('k1');
    Object.assign(server, { keys: [key.jwk], headers: { 'cache-control': 'public, max-age=60' } });
    const verifier = verifierFor();
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    clock += 59_000;
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    expect(server.fetches).toBe(1);
    clock += 2_000;
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    expect(server.fetches).toBe(2);
  });

  it('keeps them until Expires when there is no max-age, and 10 minutes when there is neither', async () => {
    const key = await providerKey('k1');
    server.keys = [key.jwk];
    server.headers = { expires: new Date(Date.now() + 120_000).toUTCString() };
    const expiring = verifierFor();
    await outcomeOf(expiring, await key.sign());
    clock += 100_000;
    await outcomeOf(expiring, await key.sign());
    expect(server.fetches).toBe(1);
    clock += 25_000;
    await outcomeOf(expiring, await key.sign());
    expect(server.fetches).toBe(2);

    server.headers = {};
    const undated = verifierFor();
    await outcomeOf(undated, await key.sign());
    clock += 9 * 60_000;
    await outcomeOf(undated, await key.sign());
    expect(server.fetches).toBe(3);
    clock += 61_000;
    await outcomeOf(undated, await key.sign());
    expect(server.fetches).toBe(4);
  });

  it('fetches at most once per cooldown even when the provider says no-store', async () => {
    const key = await providerKey('k1');
    Object.assign(server, { keys: [key.jwk], headers: { 'cache-control': 'no-store' } });
    const verifier = verifierFor();
    await outcomeOf(verifier, await key.sign());
    await outcomeOf(verifier, await key.sign());
    expect(server.fetches).toBe(1);
    clock += COOLDOWN_MS;
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    expect(server.fetches).toBe(2);
  });

  it('fetches again when a token names an unknown kid, and verifies the rotated key', async () => {
    const [old, rotated] = [await providerKey('2024'), await providerKey('2025')];
    Object.assign(server, { keys: [old.jwk], headers: { 'cache-control': 'max-age=3600' } });
    const verifier = verifierFor();
    expect(await outcomeOf(verifier, await old.sign())).toBe('OK');
    server.keys = [old.jwk, rotated.jwk];
    clock += COOLDOWN_MS;
    expect(await outcomeOf(verifier, await rotated.sign())).toBe('OK');
    expect(server.fetches).toBe(2);
  });

  it('bounds the refetches a flood of unknown kids causes to one per cooldown', async () => {
    const known = await providerKey('known');
    Object.assign(server, { keys: [known.jwk], headers: { 'cache-control': 'max-age=3600' } });
    const verifier = verifierFor();
    await outcomeOf(verifier, await known.sign());
    clock += COOLDOWN_MS;
    const forged = await Promise.all(Array.from({ length: 10 }, (_, i) => known.sign({ kid: `forged-${i}` })));
    const flood = () => Promise.all(forged.map((token) => outcomeOf(verifier, token)));
    expect(new Set(await flood())).toEqual(new Set(['UNAUTHENTICATED']));
    expect(new Set(await flood())).toEqual(new Set(['UNAUTHENTICATED']));
    expect(server.fetches).toBe(2);
    clock += COOLDOWN_MS;
    await flood();
    expect(server.fetches).toBe(3);
  });

  it('answers TRY_AGAIN and logs while the provider is down, leaves it alone for the cooldown, and recovers', async () => {
    const key = await providerKey('k1');
    server.status = 503;
    const lines: string[] = [];
    const log = createLogger('warn', { write: (line: string) => void lines.push(line) });
    const verifier = verifierFor();
    const error = await verifier.hasuraClaims(await key.sign(), log).catch((e: AppError) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).extensions).toMatchObject({ code: 'TRY_AGAIN', reason: 'jwks' });
    expect((error as AppError).extensions['retryAfterMs']).toBeGreaterThan(0);
    expect(lines.join('')).toContain('JWT signing keys could not be fetched');
    // Within the cooldown the provider is left alone.
    expect(await outcomeOf(verifier, await key.sign())).toBe('TRY_AGAIN');
    expect(server.fetches).toBe(1);
    Object.assign(server, { status: 200, keys: [key.jwk] });
    clock += COOLDOWN_MS;
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
  });

  it('answers TRY_AGAIN for a refused connection, a hung response (timeout) and a body that is not a key set', async () => {
    const key = await providerKey('k1');
    const closed = await startKeyServer();
    await closed.close();
    const unreachable = createJwtVerifier(configWith({ jwk_url: closed.url }).identity.jwt as JwtConfig, { now });
    expect(await outcomeOf(unreachable, await key.sign())).toBe('TRY_AGAIN');

    server.hang = true;
    const started = performance.now();
    expect(await outcomeOf(verifierFor(), await key.sign())).toBe('TRY_AGAIN');
    expect(performance.now() - started).toBeLessThan(5_000);

    Object.assign(server, { hang: false, keys: 'not a list' });
    expect(await outcomeOf(verifierFor(), await key.sign())).toBe('TRY_AGAIN');
  });

  it('verifies with the stale keys while the provider is down, and answers TRY_AGAIN for a kid it cannot check', async () => {
    const key = await providerKey('k1');
    Object.assign(server, { keys: [key.jwk], headers: { 'cache-control': 'max-age=60' } });
    const verifier = verifierFor();
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    server.status = 500;
    clock += 61_000;
    expect(await outcomeOf(verifier, await key.sign())).toBe('OK');
    expect(server.fetches).toBe(2);
    const newcomer = await providerKey('k2');
    expect(await outcomeOf(verifier, await newcomer.sign())).toBe('TRY_AGAIN');
  });

  it('lets type narrow the algorithms a key set may sign with', async () => {
    const key = await providerKey('k1');
    server.keys = [key.jwk];
    expect(await outcomeOf(verifierFor({ type: 'RS256' }), await key.sign())).toBe('OK');
    expect(await outcomeOf(verifierFor({ type: 'ES256' }), await key.sign())).toBe('UNAUTHENTICATED');
  });
});

describe('an RS256 provider with a JWKS URL, through the whole app', () => {
  let server: KeyServer;
  let backend: TestBackend;
  let key: Awaited<ReturnType<typeof providerKey>>;
  const provider = { audience: 'https://api.example.com', issuer: 'https://auth.example.com/' };
  const jwtSecret = (jwkUrl: string) =>
    JSON.stringify({
      type: 'RS256',
      jwk_url: jwkUrl,
      ...provider,
      claims_map: {
        'x-hasura-allowed-roles': { path: '$.roles', default: ['user'] },
        'x-hasura-default-role': 'user',
        'x-hasura-user-id': { path: '$.sub' },
        'x-hasura-tenant-id': { path: '$.org_id' },
      },
    });
  const providerToken = () => key.sign(provider, { sub: 'member-7', org_id: 'jwt-tenant' });

  beforeAll(async () => {
    server = await startKeyServer();
    key = await providerKey('k1');
    Object.assign(server, { keys: [key.jwk], headers: { 'cache-control': 'max-age=600' } });
    backend = await createTestBackend({ env: { JWT_SECRET: jwtSecret(server.url) } });
    await createTenant(backend, 'jwt-tenant');
  });
  afterAll(async () => {
    await backend.close();
    await server.close();
  });

  it("answers the viewer from the provider's token, fetching the keys once for many requests", async () => {
    for (let request = 0; request < 3; request += 1) {
      const viewer = await gql(backend.app.fetch, ViewerDocument, {}, bearer(await providerToken()));
      expect(viewer.body.data?.viewer).toEqual(memberSession);
    }
    expect(server.fetches).toBe(1);
  });

  it('answers TRY_AGAIN with Retry-After while the provider cannot be reached', async () => {
    const down = await startKeyServer();
    await down.close();
    const cutOff = await createTestBackend({ databaseUrl: backend.databaseUrl, env: { JWT_SECRET: jwtSecret(down.url) } });
    try {
      const refused = await gql(cutOff.app.fetch, ViewerDocument, {}, bearer(await providerToken()));
      expect(errorCodes(refused)).toEqual(['TRY_AGAIN']);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    } finally {
      await cutOff.close();
    }
  });
});

describe('JWT_SECRET configuration errors name their field', () => {
  const jwkUrl = 'https://auth.example.com/.well-known/jwks.json';
  const claimsMap = { 'x-hasura-allowed-roles': ['user'], 'x-hasura-default-role': 'user' };
  const withMap = (extra: Record<string, unknown>) => ({ ...hs256, claims_map: { ...claimsMap, ...extra } });

  const cases: [string, string, unknown][] = [
    ['JWT_SECRET', 'not JSON', 'plain text'],
    ['JWT_SECRET', 'not an object', ['HS256']],
    ['JWT_SECRET.kid', 'an unknown field', { ...hs256, kid: 'k1' }],
    ['JWT_SECRET.type', 'a key without a type', { key: SHARED_SECRET }],
    ['JWT_SECRET.type', 'an unknown type', { type: 'PS256', key: rsaPem }],
    ['JWT_SECRET.type', 'a shared-secret type with jwk_url', { type: 'HS256', jwk_url: jwkUrl }],
    ['JWT_SECRET.key', 'neither key nor jwk_url', { type: 'RS256' }],
    ['JWT_SECRET.key', 'a short shared secret', { type: 'HS256', key: 'short' }],
    ['JWT_SECRET.key', 'text that is no key', { type: 'RS256', key: '0123456789abcdef0123456789abcdef' }],
    ['JWT_SECRET.key', 'an EC key with RS256', { type: 'RS256', key: p256Pem }],
    ['JWT_SECRET.key', 'a P-256 key with ES384', { type: 'ES384', key: p256Jwk }],
    ['JWT_SECRET.key', 'a P-384 key with ES256', { type: 'ES256', key: p384Pem }],
    ['JWT_SECRET.key', 'an RSA JWK with Ed25519', { type: 'Ed25519', key: rsaJwk }],
    ['JWT_SECRET.key', 'a 1024-bit RSA key', { type: 'RS256', key: rsa1024Pem }],
    ['JWT_SECRET.key', 'a private PEM key', { type: 'RS256', key: rsaPrivatePem }],
    ['JWT_SECRET.key', 'a private JWK', { type: 'RS256', key: rsaPrivateJwk }],
    ['JWT_SECRET.key', 'a broken JWK string', { type: 'RS256', key: '{"kty":"RSA"' }],
    ['JWT_SECRET.key', 'a JWK missing its members', { type: 'RS256', key: { kty: 'RSA' } }],
    ['JWT_SECRET.jwk_url', 'both key and jwk_url', { type: 'RS256', key: rsaPem, jwk_url: jwkUrl }],
    ['JWT_SECRET.jwk_url', 'a jwk_url that is not http(s)', { jwk_url: 'ftp://auth.example.com/jwks.json' }],
    ['JWT_SECRET.audience', 'an empty audience list', { ...hs256, audience: [] }],
    ['JWT_SECRET.audience', 'a numeric audience', { ...hs256, audience: 7 }],
    ['JWT_SECRET.issuer', 'a numeric issuer', { ...hs256, issuer: 7 }],
    ['JWT_SECRET.claims_namespace', 'a numeric namespace', { ...hs256, claims_namespace: 7 }],
    ['JWT_SECRET.claims_namespace_path', 'both namespace and path', { ...hs256, claims_namespace: 'a', claims_namespace_path: '$.a' }],
    ['JWT_SECRET.claims_namespace_path', 'a path without $', { ...hs256, claims_namespace_path: 'a.b' }],
    ['JWT_SECRET.claims_namespace_path', 'a path step Hasura does not take', { ...hs256, claims_namespace_path: '$..a' }],
    ['JWT_SECRET.claims_format', 'an unknown format', { ...hs256, claims_format: 'xml' }],
    ['JWT_SECRET.claims_map', 'a claims_map that is a list', { ...hs256, claims_map: [] }],
    [
      'JWT_SECRET.claims_map.x-hasura-default-role',
      'a claims_map without the default role',
      { ...hs256, claims_map: { 'x-hasura-allowed-roles': ['user'] } },
    ],
    ['JWT_SECRET.claims_map.user-id', 'a variable without x-hasura-', withMap({ 'user-id': 'x' })],
    ['JWT_SECRET.claims_map.x-hasura-user-id', 'a numeric literal', withMap({ 'x-hasura-user-id': 42 })],
    ['JWT_SECRET.claims_map.x-hasura-user-id.path', 'a path without $', withMap({ 'x-hasura-user-id': { path: 'sub' } })],
    [
      'JWT_SECRET.claims_map.x-hasura-user-id.fallback',
      'an unknown mapping field',
      withMap({ 'x-hasura-user-id': { path: '$.sub', fallback: 'x' } }),
    ],
    ['JWT_SECRET.allowed_skew', 'a negative skew', { ...hs256, allowed_skew: -1 }],
    ['JWT_SECRET.allowed_skew', 'a skew in a string', { ...hs256, allowed_skew: '60' }],
    ['JWT_SECRET.header', 'a header that is a string', { ...hs256, header: 'Cookie' }],
    ['JWT_SECRET.header.type', 'an unknown header type', { ...hs256, header: { type: 'Query' } }],
    ['JWT_SECRET.header.name', 'a cookie without a name', { ...hs256, header: { type: 'Cookie' } }],
    ['JWT_SECRET.header.name', 'a named Authorization header', { ...hs256, header: { type: 'Authorization', name: 'x' } }],
    ['JWT_SECRET.header.path', 'an unknown header field', { ...hs256, header: { type: 'Cookie', name: 'session', path: '/' } }],
  ];

  it.each(cases)('%s: %s', (field, _why, secret) => {
    const raw = typeof secret === 'string' ? secret : JSON.stringify(secret);
    let thrown: unknown = null;
    try {
      loadConfig({ JWT_SECRET: raw });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe(field);
    expect((thrown as ConfigError).message.startsWith(`${field}: `)).toBe(true);
  });

  it('accepts each documented form', () => {
    const accepted = [
      hs256,
      { type: 'RS256', key: rsaPem },
      { type: 'RS256', key: rsaJwk },
      { jwk_url: jwkUrl },
      { type: 'ES256', jwk_url: jwkUrl, audience: ['a', 'b'], issuer: 'https://auth.example.com/', allowed_skew: 30 },
      { ...hs256, claims_namespace_path: "$['hasura.io'].claims", claims_format: 'stringified_json' },
      { ...hs256, claims_map: { ...claimsMap, 'x-hasura-user-id': { path: '$.sub', default: 'guest' } } },
      { ...hs256, header: { type: 'Authorization' } },
      { ...hs256, header: { type: 'Cookie', name: 'session' } },
    ];
    for (const secret of accepted) expect(configWith(secret).identity.jwt).not.toBeNull();
  });

  it("accepts docs/operations.md's provider example", () => {
    const operations = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');
    const example = /^## JWT_SECRET$[\s\S]*?```json\n([\s\S]*?)```/m.exec(operations)?.[1];
    expect(example).toBeDefined();
    expect(loadConfig({ JWT_SECRET: example! }).identity.jwt).toMatchObject({ algorithms: ['RS256'], keys: { source: 'jwk_url' } });
  });
});
