import { describe, expectTypeOf, it } from 'vitest';
import type { TransactionMark } from '../src/db/transaction-mark.js';
import type { Context, RequestServices } from '../src/graphql/context.js';

/**
 * What a resolver is handed holds nothing to query or to manage the process with, and nothing the
 * database layer carries down flows back up. These are checked by the compiler (`npm run typecheck`):
 * a property that comes back fails it.
 */
describe('what a request is handed', () => {
  it('holds no pool and none of the leases that run on the root pool', () => {
    expectTypeOf<Context['services']>().toEqualTypeOf<RequestServices>();
    expectTypeOf<RequestServices>().not.toHaveProperty('pool');
    expectTypeOf<RequestServices>().not.toHaveProperty('backgroundPool');
    const leases = expectTypeOf<RequestServices['budgetLeases']>();
    leases.not.toHaveProperty('refill');
    leases.not.toHaveProperty('renew');
    leases.not.toHaveProperty('release');
    leases.not.toHaveProperty('stop');
    leases.toHaveProperty('issued');
  });

  it('learns of a failed COMMIT from what the driver throws, not from a mark it sets', () => {
    expectTypeOf<TransactionMark>().not.toHaveProperty('commitSent');
  });
});
