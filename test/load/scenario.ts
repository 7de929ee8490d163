import type pg from 'pg';
import type { GraphQLReply, LoadClient } from './client.js';
import type { Session } from './scenarios/coupons.js';

/** How much load: a fixed number of requests, or as many as fit in a duration. */
export type Amount = { requests: number } | { durationSeconds: number };

export interface LoadScenario {
  name: string;
  /** Creates what the requests need (tenants, campaigns, contracts) through the API. */
  setup(client: LoadClient, sessions: Session): Promise<void>;
  /** The i-th request, or null when the scenario has no more. */
  request(index: number, client: LoadClient, sessions: Session): (() => Promise<GraphQLReply>) | null;
  /** A reply's status (ISSUED, JOINED, OK) or error code. */
  outcomeOf(reply: GraphQLReply): string;
  /** The scenario's invariants, counted in the database. */
  check(sql: pg.Pool, outcomes: Record<string, number>): Promise<InvariantCheck[]>;
}

/** One invariant a run checked in SQL: what must hold, what was counted, and what broke. */
export interface InvariantCheck {
  invariant: string;
  /** The counts the verdict rests on, in words ("600 events for 600 coupons"). */
  counted: string;
  /** Empty when it held; else one line for each thing that broke. */
  violations: string[];
}

export const violationsOf = (checks: InvariantCheck[]): string[] => checks.flatMap((check) => check.violations);

/** The first error's code, else the (only) payload's status, else OK. */
export function replyOutcome(reply: GraphQLReply): string {
  const error = reply.body.errors?.[0];
  if (error) return String(error.extensions?.['code'] ?? `HTTP_${reply.status}`);
  if (reply.status !== 200) return `HTTP_${reply.status}`;
  const payload = Object.values(reply.body.data ?? {})[0] as { status?: unknown } | undefined;
  return typeof payload?.status === 'string' ? payload.status : 'OK';
}

/** An answer that never came: the connection failed. */
export const NETWORK_ERROR = 'NETWORK_ERROR';
/** No answer by the end of the run: its duration ran out, or the run was aborted. */
export const TIMED_OUT = 'TIMED_OUT';

/** Errors after which nothing was written: a refusal, or a TRY_AGAIN (whose contract is that nothing was). */
const WROTE_NOTHING = new Set([
  'BAD_USER_INPUT',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'NOT_FOUND',
  'IDEMPOTENCY_KEY_REUSED',
  'TRY_AGAIN',
  'PAYMENTS_UNAVAILABLE',
]);

const ERROR_CODES = new Set([...WROTE_NOTHING, 'INTERNAL_SERVER_ERROR', NETWORK_ERROR, TIMED_OUT]);

/** An outcome that is an error code (or an HTTP status without a GraphQL answer), not a business status. */
export function isErrorOutcome(outcome: string): boolean {
  return ERROR_CODES.has(outcome) || outcome.startsWith('HTTP_');
}

/**
 * Requests whose effect is not known: no answer (a lost connection, unanswered by the end) or an
 * internal error. Each may or may not have acted, so a count of rows may exceed the answers that
 * said so by up to this many.
 */
export function undecided(outcomes: Record<string, number>): number {
  return Object.entries(outcomes)
    .filter(([outcome]) => isErrorOutcome(outcome) && !WROTE_NOTHING.has(outcome))
    .reduce((sum, [, count]) => sum + count, 0);
}
