import { z } from 'zod';
import { custom, group, wholeNumber } from './kinds.js';

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Coupons: the business calendar, budget leases and batched issues. */
export const couponVariables = group('Coupons', {
  businessTimeZone: custom({
    name: 'BUSINESS_TIME_ZONE',
    accepts: 'an IANA time zone',
    default: 'Asia/Tokyo',
    schema: z.string().refine(isTimeZone, { error: (issue) => `unknown IANA time zone "${String(issue.input)}"` }),
  }).describe("the time zone of business calendar months (a member's monthly cap)"),
  budgetLeaseTtlMs: wholeNumber({ name: 'BUDGET_LEASE_TTL_MS', default: 10_000, min: 300, max: 3_600_000 }).describe(
    'how long a budget lease of a campaign with `budgetLeaseCoupons` lives unless its process renews it (every third of it); ' +
      "after that any process's refill and the background loops (a pass every third of it) give it back to the budget row",
  ),
  issueBatchMax: wholeNumber({ name: 'COUPON_ISSUE_BATCH_MAX', default: 32, min: 1, max: 1000 }).describe(
    'the most issueCoupon requests of one tenant that a server process runs as one statement and one commit; 1 is no batching. ' +
      'A request that finds no statement of its tenant in flight in its process runs at once, alone; one that finds one waits for ' +
      'it to end and then runs with the others that waited, four or more at a time (docs/design.md §4, batched issues). ' +
      'Under load (hundreds of issues a second for one tenant per process) that takes a fifth to a third of the PostgreSQL CPU per coupon ' +
      'and answers more per second; a request that finds its tenant idle never waits (docs/benchmarks.md, batched issues)',
  ),
});
