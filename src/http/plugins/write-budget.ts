import { OperationTypeNode } from 'graphql';
import type { TokenBuckets } from '../../services/token-buckets.js';
import { tryAgain } from '../../core/errors.js';
import { toGraphQLError } from '../../graphql/errors.js';
import { rootFields } from '../operation.js';
import type { OperationCheck } from './operation-checks.js';

/**
 * MEMBER_WRITE_RATE and MEMBER_WRITE_BURST: each session of a tenant (a member, or the tenant's
 * admin) spends one token per root field of a mutation, and a mutation that finds too few is
 * answered TRY_AGAIN with the wait in Retry-After before it executes, so nothing of it is
 * written. The platform operator, and reads, are not counted. The buckets are this process's.
 */
export function writeBudget(budget: TokenBuckets): OperationCheck {
  return ({ document, operation, ctx: { session } }) => {
    if (session === null || session.tenantId === null || operation?.operation !== OperationTypeNode.MUTATION) return undefined;
    const writes = Math.max(1, rootFields(document, operation).length);
    const waitMs = budget.take(`${session.tenantId}\u0000${session.role}\u0000${session.userId ?? ''}`, writes);
    if (waitMs === 0) return undefined;
    const error = tryAgain('Too many writes from this session; resend later (MEMBER_WRITE_RATE)', {
      reason: 'write budget',
      retryAfterMs: waitMs,
    });
    return { errors: [toGraphQLError(error)] };
  };
}
