import type { InputObjectRef, ObjectRef, SchemaTypes } from '@pothos/core';
import type { AccessScope, AccessScopes } from '../identity/access.js';
import { builder } from './builder.js';
import type { AccessContexts } from './guards.js';
import { recordMutation, runMutation, type MutationSpec } from './mutation.js';

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T extends SchemaTypes> ? T : never;

/** The context a mutation's unit sees: the session narrowed to the scopes it admits. */
export type ScopedContext<Access extends Partial<AccessScopes>> = AccessContexts[keyof Access & AccessScope];

export interface MutationDefinition<Access extends Partial<AccessScopes>, Input, Prepared, Result> {
  /** Who may call it; the runtime guard and the Hasura permissions both read this (docs/design.md §6). */
  access: Access;
  description: string;
  /** The one `input` argument's type; a mutation without arguments leaves it out. */
  input?: InputObjectRef<Types, Input>;
  type: ObjectRef<Types, Result>;
  /** Checks and shapes the input before any SQL: a mistake is BAD_USER_INPUT, naming the field. */
  prepare?: (input: Input, ctx: ScopedContext<Access>) => Prepared;
  /** The unit of work for this request and what its audit row names (runMutation runs it). */
  unit: (prepared: Prepared, ctx: ScopedContext<Access>) => Omit<MutationSpec<Result>, 'operation'>;
  /** Told of every answer, replays included (for a metric). */
  answered?: (result: Result, ctx: ScopedContext<Access>) => void;
}

/** The mutation without GraphQL around it: what the resolver calls, and what the benchmark's raw row calls. */
export type MutationRunner<Access extends Partial<AccessScopes>, Input, Result> = (
  ctx: ScopedContext<Access>,
  input: Input,
) => Promise<Result>;

/**
 * The one way to declare a mutation: who may call it, its input, its unit of work and its audit,
 * in one place. It becomes a root field guarded by its scopes (Pothos's scope-auth) whose resolver
 * runs the unit through runMutation: one transaction, the Idempotency-Key, the audit row, retries.
 */
export function defineMutation<Access extends Partial<AccessScopes>, Input, Result, Prepared = Input>(
  name: string,
  definition: MutationDefinition<Access, Input, Prepared, Result>,
): MutationRunner<Access, Input, Result> {
  const run: MutationRunner<Access, Input, Result> = async (ctx, input) => {
    const prepared = definition.prepare ? definition.prepare(input, ctx) : (input as unknown as Prepared);
    let run;
    try {
      run = await runMutation(ctx, { operation: name, ...definition.unit(prepared, ctx) });
    } catch (failure) {
      recordMutation(ctx.report, { failure });
      throw failure;
    }
    recordMutation(ctx.report, { run });
    definition.answered?.(run.value, ctx);
    return run.value;
  };
  builder.mutationField(name, (t) => {
    // withAuth's type follows the literal scopes; the narrowed context is ScopedContext<Access> above.
    const guarded = (t.withAuth as unknown as (scopes: Access) => typeof t)(definition.access);
    return guarded.field({
      type: definition.type,
      description: definition.description,
      args: definition.input ? { input: guarded.arg({ type: definition.input, required: true }) } : {},
      resolve: (_root, args, ctx) => run(ctx as unknown as ScopedContext<Access>, (args as { input?: Input }).input as Input) as never,
    });
  });
  return run;
}
