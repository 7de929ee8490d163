import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { LoadClient, runLanes, type GraphQLReply } from './client.js';
import { violationsOf, type Amount, type InvariantCheck, type LoadScenario } from './scenario.js';
import type { Session } from './scenarios/coupons.js';
import { countBy, summarize, type LatencySummary } from './stats.js';

export interface Sample {
  /** Milliseconds after the release when the request was due: its place in the schedule (open model) or when it was sent. */
  dueMs: number;
  /** When it was sent; later than due only when the load generator itself fell behind. */
  sentMs: number;
  /** When it was answered. */
  endMs: number;
  /** From due to answered: a request that waited for a stalled server counts its wait. */
  latencyMs: number;
  outcome: string;
  /** For NETWORK_ERROR: how the connection failed (ECONNREFUSED, ECONNRESET, socket hang up, ...). */
  networkFailure?: string;
}

export interface LoadResult {
  scenario: string;
  /** Closed: `concurrency` requests kept in flight. Open: `offeredRate` requests per second on a fixed schedule. */
  model: 'closed' | 'open';
  /** Requests in flight (closed), or the most connections (open). */
  concurrency: number;
  offeredRate: number | null;
  requests: number;
  wallMs: number;
  requestsPerSecond: number;
  latency: LatencySummary;
  outcomes: Record<string, number>;
  /** Outcomes that are error codes (upper-case codes that are not business statuses). */
  errors: Record<string, number>;
  /** NETWORK_ERROR by how the connection failed: a refused connection was never accepted, a reset lost an accepted request. */
  networkFailures: Record<string, number>;
  /** Every invariant checked in SQL with its counts; null when no database was given. */
  checks: InvariantCheck[] | null;
  /** What broke, one line each (empty: every invariant held); null when nothing was checked. */
  violations: string[] | null;
  samples: Sample[];
}

/** An answer that never came: the connection failed. */
export const NETWORK_ERROR = 'NETWORK_ERROR';

/** How a request's connection failed, in the words a client library reports it. */
export function networkFailureOf(error: unknown): string {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  // Node reports a connection closed before any answer as ECONNRESET with this message.
  if (typeof message === 'string' && /socket hang up/.test(message)) return 'socket hang up';
  return typeof code === 'string' ? code : String(message ?? error);
}

const ERROR_CODES = new Set([
  'BAD_USER_INPUT',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'NOT_FOUND',
  'IDEMPOTENCY_KEY_REUSED',
  'TRY_AGAIN',
  'INTERNAL_SERVER_ERROR',
  NETWORK_ERROR,
]);

export function isErrorOutcome(outcome: string): boolean {
  return ERROR_CODES.has(outcome) || outcome.startsWith('HTTP_');
}

export interface RunOptions {
  client: LoadClient;
  sessions: Session;
  scenario: LoadScenario;
  concurrency: number;
  amount: Amount;
  /**
   * Open model: this many requests per second, each sent at its time whatever the server does
   * (`concurrency` is then the most connections; a request waiting for one counts the wait).
   * Without it, the closed model: `concurrency` requests in flight, the next sent when one ends.
   */
  rate?: number | null;
  /** The database to count invariants in; null skips the check. */
  sql: pg.Pool | null;
  onProgress?: (done: number, elapsedMs: number) => void;
  /** Told of every answer as it arrives (the bench reads the budget when the first refusal comes). */
  onAnswer?: (outcome: string) => void;
}

/**
 * Sets the scenario up, opens every connection, and starts the clock; then either keeps
 * `concurrency` requests in flight (closed model) or sends `rate` requests per second on a fixed
 * schedule (open model), until the request count or the duration runs out; then counts the
 * invariants in SQL.
 */
export async function runLoad(options: RunOptions): Promise<LoadResult> {
  const { client, sessions, scenario, concurrency, amount } = options;
  const rate = options.rate ?? null;
  await scenario.setup(client, sessions);
  await client.open();
  const samples: Sample[] = [];
  const started = performance.now();
  const deadline = 'durationSeconds' in amount ? started + amount.durationSeconds * 1000 : Infinity;
  const limit = 'requests' in amount ? amount.requests : Infinity;
  const send = (index: number, dueMs: number) => {
    const task = scenario.request(index, client, sessions);
    if (task === null) return null;
    return async () => {
      const sentMs = performance.now() - started;
      let networkFailure: string | undefined;
      const reply = await task().catch((error: unknown): GraphQLReply | null => {
        networkFailure = networkFailureOf(error);
        return null;
      });
      const endMs = performance.now() - started;
      const outcome = reply === null ? NETWORK_ERROR : scenario.outcomeOf(reply);
      const startMs = Math.min(dueMs, sentMs);
      options.onAnswer?.(outcome);
      samples.push({ dueMs: startMs, sentMs, endMs, latencyMs: endMs - startMs, outcome, ...(networkFailure ? { networkFailure } : {}) });
    };
  };
  const progress = setInterval(() => options.onProgress?.(samples.length, performance.now() - started), 250);
  try {
    if (rate === null) {
      // Closed: a request is due when its lane is free, so it is sent at once.
      await runLanes((index) => (index >= limit || performance.now() >= deadline ? null : send(index, Infinity)), concurrency);
    } else {
      await runOnSchedule((index, dueMs) => (index >= limit || started + dueMs >= deadline ? null : send(index, dueMs)), rate, started);
    }
  } finally {
    clearInterval(progress);
  }
  const wallMs = performance.now() - started;
  options.onProgress?.(samples.length, wallMs);
  const outcomes = countBy(samples, (s) => s.outcome);
  const checks = options.sql ? await scenario.check(options.sql, outcomes) : null;
  const errors = Object.fromEntries(Object.entries(outcomes).filter(([outcome]) => isErrorOutcome(outcome)));
  return {
    scenario: scenario.name,
    model: rate === null ? 'closed' : 'open',
    concurrency,
    offeredRate: rate,
    requests: samples.length,
    wallMs,
    requestsPerSecond: (samples.length / wallMs) * 1000,
    latency: summarize(samples.map((s) => s.latencyMs)),
    outcomes,
    errors,
    networkFailures: countBy(
      samples.filter((s) => s.networkFailure !== undefined),
      (s) => s.networkFailure!,
    ),
    checks,
    violations: checks ? violationsOf(checks) : null,
    samples,
  };
}

/**
 * The open model's clock: request i is due `i / rate` seconds after `started` and is sent then,
 * without waiting for any answer, so a slow server meets the same arrivals as a fast one and its
 * queue shows in the latencies instead of lowering the load (no coordinated omission).
 */
export async function runOnSchedule(
  next: (index: number, dueMs: number) => (() => Promise<void>) | null,
  rate: number,
  started: number,
): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  for (let index = 0; ; index++) {
    const dueMs = (index * 1000) / rate;
    const task = next(index, dueMs);
    if (task === null) break;
    const waitMs = started + dueMs - performance.now();
    // Timers tick in whole milliseconds and libuv may fire one up to 1 ms early (its loop clock is
    // truncated), so rounding up keeps a send within 1 ms of its due time; one that leaves early
    // counts its latency from when it left. What is due sooner goes now, after letting answers in.
    if (waitMs >= 1) await sleep(Math.ceil(waitMs));
    else await new Promise((resolve) => setImmediate(resolve));
    const running = task().finally(() => inFlight.delete(running));
    inFlight.add(running);
  }
  await Promise.all(inFlight);
}
