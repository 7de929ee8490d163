import type { Context } from './context.js';
import { forbidden, unauthenticated } from './errors.js';

/**
 * The roles each mutation accepts, declared on the field (`extensions.roles`) for the Hasura
 * action permissions that `npm run hasura:metadata` writes. The checks below are what enforce them.
 */
export const ACTOR_ROLES = ['user', 'admin'] as const;
export const MEMBER_ROLES = ['user'] as const;
export const ADMIN_ROLES = ['admin'] as const;

export interface TenantActor {
  tenantId: string;
  role: 'user' | 'admin';
  userId: string | null;
}

export interface Member {
  tenantId: string;
  userId: string;
}

function session(ctx: Context) {
  if (ctx.session === null) throw unauthenticated('This operation needs a session (x-hasura-role and friends)');
  return ctx.session;
}

/** Anyone acting inside one tenant: a user of it, or its admin. */
export function requireTenantActor(ctx: Context): TenantActor {
  const { role, tenantId, userId } = session(ctx);
  if (tenantId === null) throw forbidden('This operation acts inside a tenant: the session needs x-hasura-tenant-id');
  return { role, tenantId, userId };
}

/** A member acting for themself: the session's user id is the member, never an argument. */
export function requireMember(ctx: Context): Member {
  const { tenantId, userId } = requireTenantActor(ctx);
  if (userId === null) throw forbidden('This operation acts for a member: the session needs x-hasura-user-id');
  return { tenantId, userId };
}

export function requireTenantAdmin(ctx: Context): { tenantId: string } {
  const { role, tenantId } = requireTenantActor(ctx);
  if (role !== 'admin') throw forbidden('This operation is for the tenant admin');
  return { tenantId };
}

/** The platform operator: role admin with no tenant. */
export function requireOperator(ctx: Context): void {
  const { role, tenantId } = session(ctx);
  if (role !== 'admin' || tenantId !== null) throw forbidden('This operation is for the platform operator (admin without a tenant)');
}

/** An admin's reach: their tenant's id, or null for the platform operator (every tenant). */
export function requireAdminScope(ctx: Context): string | null {
  const { role, tenantId } = session(ctx);
  if (role !== 'admin') throw forbidden('This operation is for admins');
  return tenantId;
}
