import { hash, timingSafeEqual } from 'node:crypto';
import { parseCookie } from 'cookie';
import { isDevMode, type AppConfig, type JwtConfig } from '../../core/config.js';
import { forbidden, unauthenticated, type AppError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { jwtVerifierFor } from './jwt.js';

export type Role = 'user' | 'admin' | 'operator';

/**
 * Hasura session variables, trusted only after one of the checks below. The platform operator is
 * a role of its own (`operator`), never inferred from a missing tenant: every other role needs
 * `x-hasura-tenant-id`.
 */
export interface Session {
  role: Role;
  userId: string | null;
  tenantId: string | null;
}

const ROLES: readonly string[] = ['user', 'admin', 'operator'];
const TENANT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const USER_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Constant-time comparison of a presented secret; hashing first makes the lengths equal too.
 *
 * @example secretMatches(request.headers.get('x-hasura-admin-secret'), config.identity.adminSecret)
 */
export function secretMatches(presented: string | null, expected: string): boolean {
  if (presented === null) return false;
  return timingSafeEqual(digest(presented), expectedDigest(expected));
}

/** One call, no Hash object: every request with a secret or a token pays for it. */
const digest = (value: string) => hash('sha256', value, 'buffer');

/** The configured secrets are few and fixed: each is hashed once, not on every request. */
const expectedDigests = new Map<string, Buffer>();
function expectedDigest(expected: string): Buffer {
  let found = expectedDigests.get(expected);
  if (found === undefined) {
    found = digest(expected);
    expectedDigests.set(expected, found);
  }
  return found;
}

/**
 * Builds a session from Hasura-style variables (names case-insensitive, values strings). A
 * variable that is present is judged as sent: an empty or null tenant id is refused, and a name
 * given twice in two cases is refused rather than one of them winning. A role other than
 * `operator` without a tenant is refused: a tenant id that went missing (a header past a proxy's
 * limit, a claim left out) grants nothing.
 *
 * @example const session = sessionFromVariables(body.session_variables)
 */
export function sessionFromVariables(variables: Record<string, unknown>): Session | null {
  const lower = new Map<string, unknown>();
  for (const [name, value] of Object.entries(variables)) {
    const key = name.toLowerCase();
    if (lower.has(key)) throw unauthenticated(`Session variable ${key} is given more than once`);
    lower.set(key, value);
  }
  const text = (name: string) => {
    if (!lower.has(name)) return null;
    const value = lower.get(name);
    if (typeof value !== 'string') throw unauthenticated(`Session variable ${name} must be a string`);
    if (value === '') throw unauthenticated(`Session variable ${name} is empty`);
    return value;
  };
  const role = text('x-hasura-role');
  if (role === null) return null;
  if (!ROLES.includes(role)) throw forbidden(`Role "${role}" has no access to this service`);
  const tenantId = text('x-hasura-tenant-id');
  const userId = text('x-hasura-user-id');
  if (tenantId !== null && !TENANT_ID.test(tenantId)) throw unauthenticated('Malformed x-hasura-tenant-id');
  if (userId !== null && !USER_ID.test(userId)) throw unauthenticated('Malformed x-hasura-user-id');
  // The operator acts for the platform, not for a tenant: a tenant id beside the role is not used.
  if (role === 'operator') return { role, tenantId: null, userId };
  if (tenantId === null) throw unauthenticated(`Role ${role} needs x-hasura-tenant-id (the platform operator is role operator)`);
  return { role: role as Role, tenantId, userId };
}

/**
 * A presented x-action-secret is right only when ACTION_SECRET is set and equal to it.
 *
 * @example if (!actionSecretMatches(presented, config)) throw unauthenticated()
 */
export function actionSecretMatches(presented: string, config: AppConfig): boolean {
  return config.identity.actionSecret !== null && secretMatches(presented, config.identity.actionSecret);
}

/**
 * The refusal a request's x-action-secret (null: none sent) earns on `route`, or null when it earns
 * none. A secret that is sent is judged wherever it is sent, in dev mode too. On /graphql it is one
 * credential among others, so sending none is no fault. /actions trusts the secret alone: outside
 * dev mode it needs ACTION_SECRET configured and sent; dev mode (no secret configured) takes a
 * request without one.
 *
 * @example const refusal = actionSecretRefusal(request.headers.get('x-hasura-action-secret'), config, '/actions')
 */
export function actionSecretRefusal(presented: string | null, config: AppConfig, route: '/graphql' | '/actions'): AppError | null {
  if (route === '/graphql') {
    return presented === null || actionSecretMatches(presented, config) ? null : unauthenticated('Invalid x-action-secret');
  }
  const { actionSecret } = config.identity;
  if (actionSecret === null && !isDevMode(config)) return unauthenticated('/actions needs ACTION_SECRET to be configured');
  const accepted = presented === null ? actionSecret === null : actionSecretMatches(presented, config);
  return accepted ? null : unauthenticated('Missing or invalid x-action-secret');
}

/**
 * The token of an `Authorization: Bearer <token>` header, or null.
 *
 * @example const token = bearerToken(request.headers.get('authorization'))
 */
export function bearerToken(authorization: string | null): string | null {
  const match = authorization === null ? null : /^bearer\s+(\S+)\s*$/i.exec(authorization);
  return match ? match[1]! : null;
}

function hasuraHeaders(headers: Headers): Record<string, string> {
  const variables: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name.toLowerCase().startsWith('x-hasura-')) variables[name.toLowerCase()] = value;
  });
  return variables;
}

/** The JWT a request presents, where JWT_SECRET's `header` says to look; null when it presents none. */
function presentedJwt(headers: Headers, jwt: JwtConfig | null): string | null {
  const authorization = headers.get('authorization');
  const isBearer = authorization !== null && /^bearer\s/i.test(authorization);
  if (jwt?.token.in === 'Cookie') {
    if (isBearer) throw unauthenticated(`Bearer tokens are not accepted: the JWT is read from the "${jwt.token.name}" cookie`);
    return parseCookie(headers.get('cookie') ?? '')[jwt.token.name] || null;
  }
  if (!isBearer) return null;
  if (jwt === null) throw unauthenticated('Bearer tokens are not accepted: JWT_SECRET is not configured');
  const token = bearerToken(authorization);
  if (token === null) throw unauthenticated('The JWT is invalid');
  return token;
}

async function sessionFromJwt(token: string, jwt: JwtConfig, requestedRole: string | null, log?: Logger): Promise<Session> {
  const record = await jwtVerifierFor(jwt).hasuraClaims(token, log);
  const allowed = record['x-hasura-allowed-roles'];
  const fallback = record['x-hasura-default-role'];
  if (!Array.isArray(allowed) || typeof fallback !== 'string') {
    throw unauthenticated('The JWT claims need x-hasura-allowed-roles and x-hasura-default-role');
  }
  // As Hasura does: the x-hasura-role header may pick any allowed role, and nothing else.
  const role = requestedRole ?? fallback;
  if (!allowed.includes(role)) throw forbidden(`Role "${role}" is not among the token's allowed roles`);
  // The role chosen above replaces any role claim, whatever its case.
  const claims = Object.fromEntries(Object.entries(record).filter(([name]) => name.toLowerCase() !== 'x-hasura-role'));
  const session = sessionFromVariables({ ...claims, 'x-hasura-role': role });
  if (session === null) throw unauthenticated('The JWT names no role');
  return session;
}

/** One resolution per request, whoever asks (trusted documents, admission). */
const sessionsOfRequests = new WeakMap<Request, Promise<Session | null>>();

/**
 * `resolveSession` of a request's headers, worked out once per request.
 *
 * @example const session = await sessionOfRequest(request, config, log)
 */
export function sessionOfRequest(request: Request, config: AppConfig, log?: Logger): Promise<Session | null> {
  let found = sessionsOfRequests.get(request);
  if (found === undefined) {
    found = resolveSession(request.headers, config, log);
    sessionsOfRequests.set(request, found);
  }
  return found;
}

/**
 * Decides who is calling, from exactly one trusted source (docs/design.md §6). Returns null for an
 * anonymous caller (introspection still works); throws for credentials that are presented and
 * wrong, so a forged header never degrades into anonymous access.
 *
 * @example const session = await resolveSession(request.headers, config, log)
 */
export async function resolveSession(headers: Headers, config: AppConfig, log?: Logger): Promise<Session | null> {
  const forwarded = hasuraHeaders(headers);
  const presentedSecret = headers.get('x-action-secret');
  // A wrong secret is refused whatever else the request carries: a valid JWT beside it included.
  const refusal = actionSecretRefusal(presentedSecret, config, '/graphql');
  if (refusal !== null) throw refusal;
  const token = presentedJwt(headers, config.identity.jwt);
  if (token !== null && config.identity.jwt !== null)
    return sessionFromJwt(token, config.identity.jwt, forwarded['x-hasura-role'] ?? null, log);
  if (presentedSecret !== null) return sessionFromVariables(forwarded);
  if (isDevMode(config)) return sessionFromVariables(forwarded);
  if (Object.keys(forwarded).length > 0) {
    throw unauthenticated('x-hasura-* headers are trusted only with the action secret or inside a JWT');
  }
  return null;
}
