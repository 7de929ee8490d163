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
  issueBatchMax: wholeNumber({ name: 'COUPON_ISSUE_BATCH_MAX', default: 1, min: 1, max: 1000 }).describe(
    'the most issueCoupon requests of one tenant that a server process runs as one statement and one commit; 1 (the default) is no batching. ' +
      'Above 1, requests that arrive while a statement of their tenant is in flight wait for it and then run together, four or more at a time ' +
      '(docs/design.md §4, batched issues); a request never waits while nothing is in flight. Set 32 for the processes that serve a sale ' +
      '(several hundred issues a second for one tenant per process): half the PostgreSQL CPU per coupon. At everyday rates it adds 1 to 3 ms ' +
      'to an issue and saves nothing (docs/benchmarks.md, batched issues in the model)',
  ),
});
