import type { GraphQLField, GraphQLResolveInfo } from 'graphql';
import { forbidden, notFound, unauthenticated, type AppError } from '../core/errors.js';
import {
  describeScopes,
  scopesOf,
  type AccessScope,
  type AccessScopes,
  type MemberSession,
  type OperatorSession,
  type TenantAdminSession,
} from '../features/identity/access.js';
import type { Context } from './context.js';
import { runRead } from './read.js';

/**
 * The access declaration's glue to Pothos's scope-auth plugin: a root field declares its scopes
 * with `t.withAuth({ member: true })`, and its resolver then sees the narrowed context below.
 */
export interface AccessContexts {
  member: Context & { session: MemberSession };
  tenantAdmin: Context & { session: TenantAdminSession };
  operator: Context & { session: OperatorSession };
}

/**
 * The scopes of a request's session. A tenant the request's database was seen to hold (its
 * services' KnownTenants) is answered without a promise; another is read once. A session naming a
 * tenant that does not exist is refused here, NOT_FOUND, for every field that declares scopes:
 * the refusal travels as the thrown error, so no later guard has to be told of it.
 */
export function accessScopes(ctx: Context): AccessScopes | Promise<AccessScopes> {
  const tenantId = ctx.session?.tenantId ?? null;
  if (tenantId === null || ctx.services.knownTenants.has(tenantId)) return scopesOf(ctx.session, true);
  return lookUpTenant(ctx, tenantId);
}

async function lookUpTenant(ctx: Context, tenantId: string): Promise<AccessScopes> {
  const found = await runRead(ctx, (trx) => trx.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst());
  if (!found) throw notFound(`Tenant "${tenantId}"`);
  ctx.services.knownTenants.add(tenantId);
  return scopesOf(ctx.session, true);
}

/** The scopes a root field declares (`t.withAuth(...)`); null for a field open to anyone. */
export function declaredScopes(field: GraphQLField<unknown, unknown>): AccessScope[] | null {
  const scopes = (field.extensions as { pothosOptions?: { authScopes?: unknown } }).pothosOptions?.authScopes;
  if (scopes === undefined) return null;
  if (typeof scopes !== 'object' || scopes === null)
    throw new Error(`${field.name} declares its scopes as a function; declare them as an object`);
  return (Object.entries(scopes) as [AccessScope, boolean][]).filter(([, allowed]) => allowed).map(([scope]) => scope);
}

/** Why a session may not call the field: no session, or the wrong kind of caller (an unknown tenant is refused by accessScopes). */
export function accessRefusal(ctx: Context, info: GraphQLResolveInfo): AppError {
  if (ctx.session === null) return unauthenticated('This operation needs a session (x-hasura-role and friends)');
  const field = info.parentType.getFields()[info.fieldName]!;
  return forbidden(`${info.fieldName} is for ${describeScopes(declaredScopes(field) ?? [])}`);
}
