import { sql } from 'kysely';
import type { BudgetLeasing } from '../../src/features/coupons/leases.js';

/**
 * Budget pre-allocated to each process, as first drawn: a process issues from its own lease and,
 * when that is empty, from the budget row; it never touches another process's lease, and nobody
 * gives back the lease of a process that died. The budget is never exceeded, but a dead or idle
 * process's lease is stranded: the campaign refuses BUDGET_EXCEEDED while yen is left in it.
 */
export const ownLeaseOnly: BudgetLeasing = {
  name: 'own-only',
  mayTake: (alias, holder) => sql`${sql.raw(alias)}.holder = ${holder}`,
  givenBack: () => sql`false`,
};
