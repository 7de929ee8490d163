import type { InputObjectRef, ObjectRef, SchemaTypes } from '@pothos/core';
import type { AccessScope, AccessScopes } from '../features/identity/access.js';
import { builder } from './builder.js';
import type { AccessContexts } from './guards.js';
import { recordMutation, runMutation, type MutationRun, type MutationCall } from './mutation.js';

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T extends SchemaTypes> ? T : never;

/** The context a mutation's call sees: the session narrowed to the scopes it admits. */
type ScopedContext<Access extends Partial<AccessScopes>> = AccessContexts[keyof Access & AccessScope];

export interface MutationDefinition<
  Access extends Partial<AccessScopes>,
  Input,
  Prepared,
  Result,
  Answer = Result,
  UnitInput = unknown,
  Needs = undefined,
  FlowNeeds = undefined,
> {
  /** Who may call it; the runtime guard and the Hasura permissions both read this (docs/design.md §6). */
  access: Access;
  description: string;
  /** The one `input` argument's type; a mutation without arguments leaves it out. */
  input?: InputObjectRef<Types, Input>;
  /** The payload's type: it resolves the unit's result, or the flow's answer when there is a flow. */
  type: ObjectRef<Types, Answer>;
  /** Checks and shapes the input before any SQL: a mistake is BAD_USER_INPUT, naming the field. */
  prepare?: (input: Input, ctx: ScopedContext<Access>) => Prepared;
  /**
   * How runMutation calls the feature for this request, as data: the feature's unit of work, the
   * values it is called with, and the feature's function that names what its audit row names.
   * runMutation calls only the feature's functions: nothing of the declaration is called back once
   * the call is handed over.
   */
  call: (prepared: Prepared, ctx: ScopedContext<Access>) => MutationCall<UnitInput, Result, Needs>;
  /**
   * A mutation that goes on after its unit (checkout: the payment, docs/design.md §11), as data:
   * the feature's function that goes on, and what the request hands it. The feature calls `commit()`
   * once to run the unit through runMutation (one transaction, the Idempotency-Key, the audit row,
   * retries; a resend with the key replays the unit's stored result) and makes its answer of the run
   * outside any transaction. Without it, the unit's result is the answer.
   */
  flow?: (prepared: Prepared, ctx: ScopedContext<Access>) => MutationFlow<Result, Answer, FlowNeeds>;
  /** Told of every answer, replays included (for a metric). */
  answered?: (answer: Answer, ctx: ScopedContext<Access>) => void;
}

/** How defineMutation goes on after the unit: the feature's function and the values it is called with. No closure. */
interface MutationFlow<Result, Answer, FlowNeeds> {
  run: (commit: () => Promise<MutationRun<Result>>, needs: FlowNeeds) => Promise<Answer>;
  needs: FlowNeeds;
}

/** The mutation without GraphQL around it: what the resolver calls, and what the benchmark's raw row calls. */
export type BareMutation<Access extends Partial<AccessScopes>, Input, Result> = (
  ctx: ScopedContext<Access>,
  input: Input,
) => Promise<Result>;

/**
 * The one way to declare a mutation: who may call it, its input, its unit of work and its audit,
 * in one place. It becomes a root field guarded by its scopes (Pothos's scope-auth) whose resolver
 * runs the unit through runMutation: one transaction, the Idempotency-Key, the audit row, retries.
 */
export function defineMutation<Access extends Partial<AccessScopes>, Input, Result, UnitInput, Needs, Prepared = Input>(
  name: string,
  definition: MutationDefinition<Access, Input, Prepared, Result, Result, UnitInput, Needs> & { flow?: undefined },
): BareMutation<Access, Input, Result>;
export function defineMutation<Access extends Partial<AccessScopes>, Input, Result, UnitInput, Needs, Prepared, Answer, FlowNeeds>(
  name: string,
  definition: MutationDefinition<Access, Input, Prepared, Result, Answer, UnitInput, Needs, FlowNeeds> & { flow: NonNullable<unknown> },
): BareMutation<Access, Input, Answer>;
export function defineMutation<Access extends Partial<AccessScopes>, Input, Result, UnitInput, Needs, Prepared, Answer, FlowNeeds>(
  name: string,
  definition: MutationDefinition<Access, Input, Prepared, Result, Answer, UnitInput, Needs, FlowNeeds>,
): BareMutation<Access, Input, Answer> {
  const run: BareMutation<Access, Input, Answer> = async (ctx, input) => {
    const prepared = definition.prepare ? definition.prepare(input, ctx) : (input as unknown as Prepared);
    const commit = async (): Promise<MutationRun<Result>> => {
      let run;
      try {
        run = await runMutation(ctx, { operation: name, ...definition.call(prepared, ctx) });
      } catch (failure) {
        recordMutation(ctx.report, { failure });
        throw failure;
      }
      recordMutation(ctx.report, { run });
      return run;
    };
    const flow = definition.flow?.(prepared, ctx);
    const answer = flow ? await flow.run(commit, flow.needs) : ((await commit()).value as unknown as Answer);
    definition.answered?.(answer, ctx);
    return answer;
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
