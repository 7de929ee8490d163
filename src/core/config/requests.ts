import { group, wholeNumber } from './kinds.js';

/** A request's budget: its deadline, retries included, and how often its transaction is tried within it. */
export const requestVariables = group("A request's budget", {
  deadlineMs: wholeNumber({ name: 'REQUEST_DEADLINE_MS', default: 10_000, min: 100, max: 25_000 }).describe(
    "a request's whole budget, retries included (below Hasura's 30 s)",
  ),
  transactionMaxAttempts: wholeNumber({ name: 'TRANSACTION_MAX_ATTEMPTS', default: 8, min: 1, max: 100 }).describe(
    'attempts of a transaction on 40001, 40P01, 55P03',
  ),
});
