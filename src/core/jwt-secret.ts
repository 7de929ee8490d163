/**
 * JWT_SECRET, read exactly as Hasura reads HASURA_GRAPHQL_JWT_SECRET (docs/design.md §6). Everything is
 * checked here, synchronously, at start-up: a key that does not parse or does not fit its type
 * stops the server with a message naming the field (`JWT_SECRET.key: …`) instead of refusing
 * every token later.
 */
import { createPublicKey, createSecretKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { ConfigError } from './config/error.js';
import { isHttpUrl } from './http-url.js';

/** Hasura's `type` names and the algorithm a token's header must name (Hasura's Ed25519 is EdDSA). */
const ALGORITHM_OF_TYPE = {
  HS256: 'HS256',
  HS384: 'HS384',
  HS512: 'HS512',
  RS256: 'RS256',
  RS384: 'RS384',
  RS512: 'RS512',
  ES256: 'ES256',
  ES384: 'ES384',
  ES512: 'ES512',
  Ed25519: 'EdDSA',
} as const;

type KeyType = keyof typeof ALGORITHM_OF_TYPE;
type PublicKeyType = Exclude<KeyType, 'HS256' | 'HS384' | 'HS512'>;

/** The public key each type verifies with, in node:crypto's words (asymmetricKeyType, namedCurve). */
const KEY_OF_TYPE: Record<PublicKeyType, { kind: string; curve?: string; label: string }> = {
  RS256: { kind: 'rsa', label: 'an RSA key' },
  RS384: { kind: 'rsa', label: 'an RSA key' },
  RS512: { kind: 'rsa', label: 'an RSA key' },
  ES256: { kind: 'ec', curve: 'prime256v1', label: 'an EC key on P-256' },
  ES384: { kind: 'ec', curve: 'secp384r1', label: 'an EC key on P-384' },
  ES512: { kind: 'ec', curve: 'secp521r1', label: 'an EC key on P-521' },
  Ed25519: { kind: 'ed25519', label: 'an Ed25519 key' },
};

/** What a key set fetched from jwk_url may sign with when no `type` narrows it: never a shared secret. */
const PUBLIC_KEY_ALGORITHMS = (Object.keys(KEY_OF_TYPE) as PublicKeyType[]).map((type) => ALGORITHM_OF_TYPE[type]);

// jose refuses shorter RSA keys when it verifies; refusing them here says so at start-up.
const MIN_RSA_BITS = 2048;
// HS256 with a key shorter than its 256-bit output is brute-forceable; Hasura refuses it too.
const MIN_SHARED_SECRET_LENGTH = 32;
const HASURA_CLAIMS_NAMESPACE = 'https://hasura.io/jwt/claims';
const FIELDS = [
  'type',
  'key',
  'jwk_url',
  'audience',
  'issuer',
  'claims_namespace',
  'claims_namespace_path',
  'claims_format',
  'claims_map',
  'allowed_skew',
  'header',
];

/** A path into a token's payload: property names and array indexes. */
export type JsonPath = readonly (string | number)[];

/** Where one session variable of a claims_map comes from: a fixed value, or a path into the payload. */
type ClaimSource = { value: unknown } | { path: JsonPath; default?: unknown };

export type ClaimsLocation =
  /** claims_namespace or claims_namespace_path: one object (or, stringified, a JSON string) of x-hasura-* claims. */
  | { from: 'namespace'; path: JsonPath; stringified: boolean; description: string }
  /** claims_map: each session variable on its own (lower-case names). */
  | { from: 'claims_map'; map: ReadonlyMap<string, ClaimSource> };

export interface JwtConfig {
  /** Algorithms a token's header may name, in jose's names. */
  algorithms: string[];
  keys: { source: 'key'; key: KeyObject } | { source: 'jwk_url'; url: string };
  audience: string | string[] | null;
  issuer: string | null;
  claims: ClaimsLocation;
  /** Seconds of clock difference tolerated on exp, nbf and iat (jose's clockTolerance). */
  allowedSkewSeconds: number;
  /** Where a request carries its token. */
  token: { in: 'Authorization' } | { in: 'Cookie'; name: string };
}

type Spec = Record<string, unknown>;
/** Builds the error for one field: `JWT_SECRET.<field>: <problem>`. */
type Fail = (field: string, problem: string) => ConfigError;

/** Reads Hasura's HASURA_GRAPHQL_JWT_SECRET JSON; every problem names its field. */
export function parseJwtSecret(raw: string, variable = 'JWT_SECRET'): JwtConfig {
  const spec = readObject(raw, variable);
  const fail: Fail = (field, problem) => new ConfigError(`${variable}.${field}`, problem);
  const unknown = Object.keys(spec).find((field) => !FIELDS.includes(field));
  if (unknown !== undefined) throw fail(unknown, `unknown field; the fields are ${FIELDS.join(', ')}`);
  return {
    ...readKeys(spec, fail),
    audience: readAudience(spec['audience'], fail),
    issuer: readOptionalString(spec, 'issuer', fail),
    claims: readClaimsLocation(spec, fail),
    allowedSkewSeconds: readAllowedSkew(spec['allowed_skew'], fail),
    token: readTokenLocation(spec['header'], fail),
  };
}

function readObject(raw: string, variable: string): Spec {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError(variable, 'not JSON; expected Hasura\'s form, e.g. {"type":"RS256","jwk_url":"https://…/jwks.json"}');
  }
  if (!isPlainObject(parsed)) throw new ConfigError(variable, 'expected a JSON object');
  return parsed;
}

function isPlainObject(value: unknown): value is Spec {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readKeys(spec: Spec, fail: Fail): Pick<JwtConfig, 'algorithms' | 'keys'> {
  const type = spec['type'] === undefined ? null : readType(spec['type'], fail);
  if (spec['key'] !== undefined && spec['jwk_url'] !== undefined) {
    throw fail('jwk_url', 'give either "key" or "jwk_url", not both');
  }
  if (spec['jwk_url'] !== undefined) {
    if (type !== null && !isPublicKeyType(type)) throw fail('type', `${type} verifies with a shared "key", not a "jwk_url"`);
    // A given type narrows what the key set may sign with, as in Hasura.
    const algorithms = type === null ? PUBLIC_KEY_ALGORITHMS : [ALGORITHM_OF_TYPE[type]];
    return { algorithms, keys: { source: 'jwk_url', url: readJwkUrl(spec['jwk_url'], fail) } };
  }
  if (spec['key'] === undefined) throw fail('key', 'needed: a "type" with its "key", or a "jwk_url"');
  if (type === null) throw fail('type', `needed with "key": one of ${Object.keys(ALGORITHM_OF_TYPE).join(', ')}`);
  const key = isPublicKeyType(type) ? readPublicKey(spec['key'], type, fail) : readSharedSecret(spec['key'], fail);
  return { algorithms: [ALGORITHM_OF_TYPE[type]], keys: { source: 'key', key } };
}

function readType(value: unknown, fail: Fail): KeyType {
  if (typeof value !== 'string' || !Object.hasOwn(ALGORITHM_OF_TYPE, value)) {
    throw fail('type', `expected one of ${Object.keys(ALGORITHM_OF_TYPE).join(', ')}`);
  }
  return value as KeyType;
}

function isPublicKeyType(type: KeyType): type is PublicKeyType {
  return Object.hasOwn(KEY_OF_TYPE, type);
}

function readSharedSecret(value: unknown, fail: Fail): KeyObject {
  if (typeof value !== 'string' || value.length < MIN_SHARED_SECRET_LENGTH) {
    throw fail('key', `a shared secret must be a string of at least ${MIN_SHARED_SECRET_LENGTH} characters`);
  }
  return createSecretKey(Buffer.from(value, 'utf8'));
}

/** A PEM public key (SPKI or PKCS#1), a PEM X.509 certificate, or a JWK (object or JSON string). */
function readPublicKey(value: unknown, type: PublicKeyType, fail: Fail): KeyObject {
  const input = publicKeyInput(value, fail);
  // createPublicKey would quietly derive the public half of a private key: a private key in the
  // environment is a leak to stop, not a form to accept.
  if ('jwk' in input ? 'd' in input.jwk : input.pem.includes('PRIVATE KEY')) {
    throw fail('key', 'this is a private key; give the public key (or the certificate)');
  }
  let key: KeyObject;
  try {
    key = 'jwk' in input ? createPublicKey({ key: input.jwk as JsonWebKey, format: 'jwk' }) : createPublicKey(input.pem);
  } catch {
    throw fail('key', `not a readable ${'jwk' in input ? 'JWK' : 'PEM public key or certificate'}`);
  }
  const problem = misfit(key, type);
  if (problem !== null) throw fail('key', problem);
  return key;
}

function publicKeyInput(value: unknown, fail: Fail): { jwk: Spec } | { pem: string } {
  if (isPlainObject(value)) return { jwk: value };
  if (typeof value !== 'string') throw fail('key', 'expected a PEM public key, a PEM certificate or a JWK');
  return value.trim().startsWith('{') ? { jwk: parseJwk(value, fail) } : { pem: value };
}

function parseJwk(text: string, fail: Fail): Spec {
  try {
    const parsed: unknown = JSON.parse(text);
    if (isPlainObject(parsed)) return parsed;
  } catch {
    // reported below
  }
  throw fail('key', 'starts like a JWK but is not a JSON object');
}

/** Why `key` cannot verify tokens of `type`, or null when it can. */
function misfit(key: KeyObject, type: PublicKeyType): string | null {
  const wanted = KEY_OF_TYPE[type];
  const kind = key.asymmetricKeyType ?? 'unknown';
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (kind !== wanted.kind || curve !== wanted.curve)
    return `${type} needs ${wanted.label}; the key given is ${kind}${curve ? ` (${curve})` : ''}`;
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (kind === 'rsa' && (bits ?? 0) < MIN_RSA_BITS) return `an RSA key needs at least ${MIN_RSA_BITS} bits; this one has ${bits}`;
  return null;
}

function readJwkUrl(value: unknown, fail: Fail): string {
  if (isHttpUrl(value)) return value;
  throw fail('jwk_url', 'expected an http:// or https:// URL of a JSON Web Key Set');
}

function readAudience(value: unknown, fail: Fail): string | string[] | null {
  if (value === undefined) return null;
  if (typeof value === 'string' && value !== '') return value;
  if (Array.isArray(value) && value.length > 0 && value.every((entry) => typeof entry === 'string' && entry !== '')) {
    return value as string[];
  }
  throw fail('audience', 'expected a string or a non-empty list of strings');
}

function readOptionalString(spec: Spec, field: string, fail: Fail): string | null {
  const value = spec[field];
  if (value === undefined) return null;
  if (typeof value !== 'string' || value === '') throw fail(field, 'expected a non-empty string');
  return value;
}

function readClaimsLocation(spec: Spec, fail: Fail): ClaimsLocation {
  const format = spec['claims_format'] ?? 'json';
  if (format !== 'json' && format !== 'stringified_json') throw fail('claims_format', 'expected "json" or "stringified_json"');
  // As in Hasura, a claims_map replaces the namespace: each variable says where it comes from.
  if (spec['claims_map'] !== undefined) return { from: 'claims_map', map: readClaimsMap(spec['claims_map'], fail) };
  const stringified = format === 'stringified_json';
  if (spec['claims_namespace'] !== undefined && spec['claims_namespace_path'] !== undefined) {
    throw fail('claims_namespace_path', 'give either "claims_namespace" or "claims_namespace_path", not both');
  }
  const pathText = readOptionalString(spec, 'claims_namespace_path', fail);
  if (pathText !== null)
    return { from: 'namespace', path: readJsonPath(pathText, 'claims_namespace_path', fail), stringified, description: pathText };
  const namespace = readOptionalString(spec, 'claims_namespace', fail) ?? HASURA_CLAIMS_NAMESPACE;
  return { from: 'namespace', path: [namespace], stringified, description: `"${namespace}"` };
}

/**
 * Hasura's subset of JSON path: `$`, then steps `.name` (letters, digits, `_`, `-`), `['any.name']`
 * and `[0]`. A full JSONPath library would accept filters and scripts Hasura refuses.
 */
const PATH_STEP = /\.([A-Za-z0-9_-]+)|\['([^']*)'\]|\["([^"]*)"\]|\[(\d+)\]/y;

function parseJsonPath(text: string): JsonPath | null {
  if (!text.startsWith('$')) return null;
  const step = new RegExp(PATH_STEP.source, 'y');
  step.lastIndex = 1;
  const path: (string | number)[] = [];
  while (step.lastIndex < text.length) {
    const match = step.exec(text);
    if (match === null) return null;
    path.push(match[4] !== undefined ? Number(match[4]) : (match[1] ?? match[2] ?? match[3])!);
  }
  return path;
}

function readJsonPath(text: unknown, field: string, fail: Fail): JsonPath {
  const path = typeof text === 'string' ? parseJsonPath(text) : null;
  if (path === null) throw fail(field, `expected a JSON path such as $.a.b or $['a.b'].c`);
  return path;
}

const REQUIRED_CLAIMS = ['x-hasura-allowed-roles', 'x-hasura-default-role'];

function readClaimsMap(value: unknown, fail: Fail): Map<string, ClaimSource> {
  if (!isPlainObject(value)) throw fail('claims_map', 'expected an object of session variables');
  const map = new Map<string, ClaimSource>();
  for (const [name, source] of Object.entries(value)) {
    if (!/^x-hasura-/i.test(name)) throw fail(`claims_map.${name}`, 'session variables start with x-hasura-');
    map.set(name.toLowerCase(), readClaimSource(source, `claims_map.${name}`, fail));
  }
  const missing = REQUIRED_CLAIMS.find((name) => !map.has(name));
  if (missing !== undefined) throw fail(`claims_map.${missing}`, 'needed: a value or {"path": "$…"}');
  return map;
}

function readClaimSource(source: unknown, field: string, fail: Fail): ClaimSource {
  if (!isPlainObject(source)) {
    const isText = (value: unknown) => typeof value === 'string';
    if (isText(source) || (Array.isArray(source) && source.every(isText))) return { value: source };
    throw fail(field, 'expected a string, a list of strings, or {"path": "$…", "default"?: …}');
  }
  const unknown = Object.keys(source).find((name) => name !== 'path' && name !== 'default');
  if (unknown !== undefined) throw fail(`${field}.${unknown}`, 'unknown field; expected "path" and optionally "default"');
  const path = readJsonPath(source['path'], `${field}.path`, fail);
  return 'default' in source ? { path, default: source['default'] } : { path };
}

function readAllowedSkew(value: unknown, fail: Fail): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    throw fail('allowed_skew', 'expected a number of seconds, 0 or more');
  return value;
}

function readTokenLocation(value: unknown, fail: Fail): JwtConfig['token'] {
  if (value === undefined) return { in: 'Authorization' };
  if (!isPlainObject(value)) throw fail('header', 'expected {"type":"Authorization"} or {"type":"Cookie","name":"…"}');
  const unknown = Object.keys(value).find((name) => name !== 'type' && name !== 'name');
  if (unknown !== undefined) throw fail(`header.${unknown}`, 'unknown field; expected "type" and, for a cookie, "name"');
  if (value['type'] === 'Authorization') {
    if (value['name'] !== undefined) throw fail('header.name', 'only a Cookie has a name; the Authorization header is always Bearer');
    return { in: 'Authorization' };
  }
  if (value['type'] !== 'Cookie') throw fail('header.type', 'expected "Authorization" or "Cookie" (with "name")');
  if (typeof value['name'] !== 'string' || value['name'] === '')
    throw fail('header.name', 'expected the name of the cookie that holds the token');
  return { in: 'Cookie', name: value['name'] };
}
