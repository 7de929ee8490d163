import { OperationTypeNode, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { TokenBuckets } from '../../services/token-buckets.js';
import { tryAgain } from '../../core/errors.js';
import type { Context } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';
import { operationOf, rootFields } from '../operation.js';

/**
 * MEMBER_WRITE_RATE and MEMBER_WRITE_BURST: each session of a tenant (a member, or the tenant's
 * admin) spends one token per root field of a mutation, and a mutation that finds too few is
 * answered TRY_AGAIN with the wait in Retry-After before it executes, so nothing of it is
 * written. The platform operator, and reads, are not counted. The buckets are this process's.
 */
export function useWriteBudget(budget: TokenBuckets): Plugin<Context> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const { session } = args.contextValue as Context;
      if (session === null || session.tenantId === null) return;
      const document = args.document as DocumentNode;
      const operation = operationOf(document, args.operationName);
      if (operation?.operation !== OperationTypeNode.MUTATION) return;
      const writes = Math.max(1, rootFields(document, operation).length);
      const waitMs = budget.take(`${session.tenantId}\u0000${session.role}\u0000${session.userId ?? ''}`, writes);
      if (waitMs === 0) return;
      const error = tryAgain('Too many writes from this session; resend later (MEMBER_WRITE_RATE)', {
        reason: 'write budget',
        retryAfterMs: waitMs,
      });
      setResultAndStopExecution({ errors: [toGraphQLError(error)] });
    },
  };
}
