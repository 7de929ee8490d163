import type { Role, Session } from './session.js';

/**
 * Who may call a root field: the kinds of session the API knows. Each root field declares the
 * scopes it admits once (see src/graphql/guards.ts); the runtime check and the Hasura action
 * permissions that `npm run hasura:metadata` writes both read that one declaration.
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

/** The platform operator: a role of its own, acting for no tenant. */
export interface OperatorSession extends Session {
  role: 'operator';
  tenantId: null;
}

/** The Hasura role each scope stands for, in the generated action permissions. */
export const HASURA_ROLE_OF: Record<AccessScope, Role> = { member: 'user', tenantAdmin: 'admin', operator: 'operator' };

const SCOPE_DESCRIPTIONS: Record<AccessScope, string> = {
  member: 'a member (role user with x-hasura-tenant-id and x-hasura-user-id)',
  tenantAdmin: "the tenant's admin (role admin with x-hasura-tenant-id)",
  operator: 'the platform operator (role operator)',
};

const NO_SCOPES: AccessScopes = { member: false, tenantAdmin: false, operator: false };

/**
 * The scopes a session holds. A session naming a tenant that does not exist holds none, so every
 * tenant operation answers NOT_FOUND instead of failing on a foreign key.
 *
 * @example const scopes = scopesOf(session, await knownTenants.has(db, session.tenantId))
 */
export function scopesOf(session: Session | null, tenantExists: boolean): AccessScopes {
  if (session === null) return NO_SCOPES;
  if (session.role === 'operator') return { ...NO_SCOPES, operator: true };
  if (session.tenantId === null || !tenantExists) return NO_SCOPES;
  return { member: session.role === 'user' && session.userId !== null, tenantAdmin: session.role === 'admin', operator: false };
}

/**
 * Who a field admits, in words: "a member (…) or the tenant's admin (…)".
 *
 * @example describeScopes(['member', 'tenantAdmin']) // 'a member or a tenant admin'
 */
export function describeScopes(scopes: readonly AccessScope[]): string {
  return scopes.map((scope) => SCOPE_DESCRIPTIONS[scope]).join(' or ');
}
