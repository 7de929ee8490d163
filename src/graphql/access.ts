import type { GraphQLField, GraphQLResolveInfo } from 'graphql';
import type { Role, Session } from '../http/session.js';
import type { Context } from './context.js';
import { forbidden, notFound, unauthenticated, type AppError } from './errors.js';
import { runRead } from './read.js';

/**
 * Who may call a root field, declared once on the field (`t.withAuth({ member: true })`, Pothos's
 * scope-auth plugin). The runtime check and the Hasura action permissions that
 * `npm run hasura:metadata` writes both read that one declaration.
 */
export type AccessScope = 'member' | 'tenantAdmin' | 'operator';
export type AccessScopes = Record<AccessScope, boolean>;

/** A member acting for themself: the session's user id is the member, never an argument. */
export interface MemberSession extends Session {
  role: 'user';
  tenantId: string;
  userId: string;
}

export interface TenantAdminSession extends Session {
  role: 'admin';
  tenantId: string;
}

/** The platform operator: role admin with no tenant. */
export interface OperatorSession extends Session {
  role: 'admin';
  tenantId: null;
}

/** The context a resolver sees once its field's scope admitted the session. */
export interface AccessContexts {
  member: Context & { session: MemberSession };
  tenantAdmin: Context & { session: TenantAdminSession };
  operator: Context & { session: OperatorSession };
}

/** The Hasura role each scope stands for, in the generated action permissions. */
export const HASURA_ROLE_OF: Record<AccessScope, Role> = { member: 'user', tenantAdmin: 'admin', operator: 'admin' };

const SCOPE_DESCRIPTIONS: Record<AccessScope, string> = {
  member: 'a member (role user with x-hasura-tenant-id and x-hasura-user-id)',
  tenantAdmin: "the tenant's admin (role admin with x-hasura-tenant-id)",
  operator: 'the platform operator (role admin without x-hasura-tenant-id)',
};

const NO_SCOPES: AccessScopes = { member: false, tenantAdmin: false, operator: false };

/** Tenants seen to exist; tenants are never deleted, so a hit stays true. */
const KNOWN_TENANTS_MAX = 10_000;
const knownTenants = new Set<string>();
/** Requests whose session named a tenant that does not exist. */
const unknownTenant = new WeakSet<Context>();

async function lookUpTenant(ctx: Context, tenantId: string): Promise<boolean> {
  const found = await runRead(ctx, (trx) => trx.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst());
  if (!found) return false;
  if (knownTenants.size >= KNOWN_TENANTS_MAX) knownTenants.clear();
  knownTenants.add(tenantId);
  return true;
}

function tenantScopes(session: Session): AccessScopes {
  return { member: session.role === 'user' && session.userId !== null, tenantAdmin: session.role === 'admin', operator: false };
}

/**
 * The scopes a request's session holds. A session naming a tenant that does not exist holds none:
 * every tenant-scoped operation then answers NOT_FOUND instead of failing on a foreign key. A
 * tenant seen before is answered without a promise.
 */
export function accessScopes(ctx: Context): AccessScopes | Promise<AccessScopes> {
  const { session } = ctx;
  if (session === null) return NO_SCOPES;
  if (session.tenantId === null) return { ...NO_SCOPES, operator: session.role === 'admin' };
  if (knownTenants.has(session.tenantId)) return tenantScopes(session);
  return lookUpTenant(ctx, session.tenantId).then((exists) => {
    if (exists) return tenantScopes(session);
    unknownTenant.add(ctx);
    return NO_SCOPES;
  });
}

/** The scopes a root field declares (`t.withAuth(...)`); null for a field open to anyone. */
export function declaredScopes(field: GraphQLField<unknown, unknown>): AccessScope[] | null {
  const scopes = (field.extensions as { pothosOptions?: { authScopes?: unknown } }).pothosOptions?.authScopes;
  if (scopes === undefined) return null;
  if (typeof scopes !== 'object' || scopes === null) throw new Error(`${field.name} declares its scopes as a function; declare them as an object`);
  return (Object.entries(scopes) as [AccessScope, boolean][]).filter(([, allowed]) => allowed).map(([scope]) => scope);
}

/** Why a session may not call the field: no session, an unknown tenant, or the wrong kind of caller. */
export function accessRefusal(ctx: Context, info: GraphQLResolveInfo): AppError {
  if (ctx.session === null) return unauthenticated('This operation needs a session (x-hasura-role and friends)');
  if (unknownTenant.has(ctx)) return notFound(`Tenant "${ctx.session.tenantId}"`);
  const field = info.parentType.getFields()[info.fieldName]!;
  const allowed = (declaredScopes(field) ?? []).map((scope) => SCOPE_DESCRIPTIONS[scope]);
  return forbidden(`${info.fieldName} is for ${allowed.join(' or ')}`);
}
