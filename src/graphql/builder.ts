import SchemaBuilder from '@pothos/core';
import ComplexityPlugin from '@pothos/plugin-complexity';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import type { AccessScopes } from '../features/identity/access.js';
import { accessRefusal, accessScopes, type AccessContexts } from './guards.js';
import type { Context } from './context.js';

/** A list whose size no argument states costs this many times its selection (Pothos's own default). */
const UNSIZED_LIST_MULTIPLIER = 10;

export const builder = new SchemaBuilder<{
  Context: Context;
  AuthScopes: AccessScopes;
  AuthContexts: AccessContexts;
  DefaultInputFieldRequiredness: true;
  DefaultFieldNullability: false;
  Scalars: {
    ID: { Input: string; Output: string };
    UUID: { Input: string; Output: string };
    DateTime: { Input: Date; Output: Date | string };
  };
}>({
  plugins: [ScopeAuthPlugin, ComplexityPlugin],
  scopeAuth: {
    authScopes: accessScopes,
    unauthorizedError: (_parent, ctx, info) => accessRefusal(ctx, info),
  },
  // Fields declare their cost here; the document limits check the whole operation before it runs
  // (src/http/plugins/document-limits.ts), so the plugin's own per-resolver check stays off.
  complexity: { defaultComplexity: 1, defaultListMultiplier: UNSIZED_LIST_MULTIPLIER, disabled: true },
  defaultInputFieldRequiredness: true,
  defaultFieldNullability: false,
});

builder.queryType({});
builder.mutationType({});
