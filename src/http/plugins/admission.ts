import type { Plugin } from 'graphql-yoga';
import { admissionKey, type Admission, type Admitted } from '../../admission.js';
import type { Context } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';

/**
 * Every GraphQL operation (on /graphql and /actions alike) takes a turn before it executes and
 * gives it back when it ends, whatever the outcome. Register it after the plugins that may refuse
 * an operation without waiting (limits, Idempotency-Key checks).
 */
export function useAdmission(admission: Admission): Plugin<Context> {
  return {
    onExecute({ args, executeFn, setExecuteFn, setResultAndStopExecution }) {
      const ctx = args.contextValue as Context;
      const proceed = (admitted: Admitted) => {
        if (!admitted.ok) {
          setResultAndStopExecution({ errors: [toGraphQLError(admitted.error)] });
          return;
        }
        // Given back when execution ends, even by a throw; onExecuteDone covers a later plugin
        // that answers without executing. Releasing twice is a no-op.
        setExecuteFn(async (executeArgs) => {
          try {
            return await executeFn(executeArgs);
          } finally {
            admitted.release();
          }
        });
        return { onExecuteDone: () => admitted.release() };
      };
      const admitted = admission.admit(admissionKey(ctx.session), ctx.signal, ctx.deadline);
      return admitted instanceof Promise ? admitted.then(proceed) : proceed(admitted);
    },
  };
}
