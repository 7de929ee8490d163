/**
 * Verifies a JWT as JWT_SECRET describes (src/core/jwt-secret.ts) and returns its Hasura claims.
 * jose does the cryptography and checks exp, nbf, aud and iss; this file picks the keys, finds
 * the claims, and decides what a failure tells the client.
 */
import { errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { tryAgain, unauthenticated } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { ClaimsLocation, JsonPath, JwtConfig } from '../../core/jwt-secret.js';
import { KeysUnavailableError, RemoteKeySet, type RemoteKeySetOptions } from './jwks.js';

export interface JwtVerifier {
  /**
   * The token's x-hasura-* claims. UNAUTHENTICATED when the token is proven bad; TRY_AGAIN when
   * the keys to judge it cannot be fetched. `log` hears of a failed key fetch.
   */
  hasuraClaims(token: string, log?: Logger): Promise<Record<string, unknown>>;
}

/**
 * Verifies a token against the configured keys and claims: its JWT claims, or an UNAUTHENTICATED error.
 *
 * @example const claims = await createJwtVerifier(config.identity.jwt).hasuraClaims(token, log)
 */
export function createJwtVerifier(jwt: JwtConfig, options?: RemoteKeySetOptions): JwtVerifier {
  const keysFor = keyLookup(jwt, options);
  return {
    async hasuraClaims(token, log) {
      return claimsAt(await verifiedPayload(token, jwt, keysFor(log)), jwt.claims);
    },
  };
}

// Keyed by the configuration object, so the key cache lives exactly as long as the app's config.
const verifiers = new WeakMap<JwtConfig, JwtVerifier>();

/**
 * The verifier of this configuration, created on first use.
 *
 * @example const claims = await jwtVerifierFor(config.identity.jwt).hasuraClaims(token, log)
 */
export function jwtVerifierFor(jwt: JwtConfig): JwtVerifier {
  let verifier = verifiers.get(jwt);
  if (verifier === undefined) {
    verifier = createJwtVerifier(jwt);
    verifiers.set(jwt, verifier);
  }
  return verifier;
}

function keyLookup(jwt: JwtConfig, options?: RemoteKeySetOptions): (log?: Logger) => JWTVerifyGetKey {
  if (jwt.keys.source === 'key') {
    const { key } = jwt.keys;
    return () => async () => key;
  }
  const remote = new RemoteKeySet(jwt.keys.url, options);
  return (log) => remote.resolver(log);
}

async function verifiedPayload(token: string, jwt: JwtConfig, keys: JWTVerifyGetKey): Promise<JWTPayload> {
  try {
    const { payload } = await jwtVerify(token, keys, {
      algorithms: jwt.algorithms,
      ...(jwt.audience === null ? {} : { audience: jwt.audience }),
      ...(jwt.issuer === null ? {} : { issuer: jwt.issuer }),
      clockTolerance: jwt.allowedSkewSeconds,
      // A token without exp would be good forever.
      requiredClaims: ['exp'],
    });
    return payload;
  } catch (error) {
    if (error instanceof KeysUnavailableError) {
      throw tryAgain("The identity provider's signing keys could not be fetched", { reason: 'jwks', retryAfterMs: error.retryAfterMs });
    }
    if (error instanceof joseErrors.JOSEError) throw unauthenticated(refusalOf(error));
    throw error;
  }
}

/** What the client reads: enough to fix its own mistake, nothing about keys or expected claims. */
function refusalOf(error: joseErrors.JOSEError): string {
  if (error instanceof joseErrors.JWTExpired) return 'The JWT has expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'exp' && error.reason === 'missing') {
    return 'The JWT has no expiry (exp)';
  }
  return 'The JWT is invalid';
}

function claimsAt(payload: JWTPayload, location: ClaimsLocation): Record<string, unknown> {
  if (location.from === 'claims_map') {
    const entries = [...location.map].map(([name, source]) => [
      name,
      'value' in source ? source.value : (valueAt(payload, source.path) ?? source.default),
    ]);
    return Object.fromEntries(entries);
  }
  const found = valueAt(payload, location.path);
  const claims = location.stringified ? parseJsonText(found) : found;
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) {
    throw unauthenticated(`The JWT has no Hasura claims at ${location.description}`);
  }
  return claims as Record<string, unknown>;
}

/** claims_format stringified_json: the claims are a JSON string inside the token. */
function parseJsonText(value: unknown): unknown {
  if (typeof value !== 'string') return undefined;
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

/** Own properties only: a path never reaches __proto__ or constructor. */
function valueAt(root: unknown, path: JsonPath): unknown {
  let value = root;
  for (const step of path) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, step)) return undefined;
    value = (value as Record<string | number, unknown>)[step];
  }
  return value;
}
