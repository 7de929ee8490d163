import type pg from 'pg';
import { LoadClient, runLanes } from './client.js';
import type { Amount, LoadScenario } from './scenario.js';
import type { Session } from './scenarios/coupons.js';
import { countBy, summarize, type LatencySummary } from './stats.js';

export interface Sample {
  /** Milliseconds after the release when the request was answered. */
  endMs: number;
  latencyMs: number;
  outcome: string;
}

export interface LoadResult {
  scenario: string;
  concurrency: number;
  requests: number;
  wallMs: number;
  requestsPerSecond: number;
  latency: LatencySummary;
  outcomes: Record<string, number>;
  /** Outcomes that are error codes (upper-case codes that are not business statuses). */
  errors: Record<string, number>;
  violations: string[] | null;
  samples: Sample[];
}

const ERROR_CODES = new Set(['BAD_USER_INPUT', 'UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'TRY_AGAIN', 'INTERNAL_SERVER_ERROR']);

export function isErrorOutcome(outcome: string): boolean {
  return ERROR_CODES.has(outcome) || outcome.startsWith('HTTP_');
}

export interface RunOptions {
  client: LoadClient;
  sessions: Session;
  scenario: LoadScenario;
  concurrency: number;
  amount: Amount;
  /** The database to count invariants in; null skips the check. */
  sql: pg.Pool | null;
  onProgress?: (done: number, elapsedMs: number) => void;
}

/**
 * Sets the scenario up, opens every connection, releases all lanes together, and keeps them busy
 * until the request count or the duration runs out; then counts the invariants in SQL.
 */
export async function runLoad(options: RunOptions): Promise<LoadResult> {
  const { client, sessions, scenario, concurrency, amount } = options;
  await scenario.setup(client, sessions);
  await client.open();
  const samples: Sample[] = [];
  const started = performance.now();
  const deadline = 'durationSeconds' in amount ? started + amount.durationSeconds * 1000 : Infinity;
  const limit = 'requests' in amount ? amount.requests : Infinity;
  const progress = setInterval(() => options.onProgress?.(samples.length, performance.now() - started), 250);
  try {
    await runLanes((index) => {
      if (index >= limit || performance.now() >= deadline) return null;
      const task = scenario.request(index, client, sessions);
      if (task === null) return null;
      return async () => {
        const reply = await task();
        samples.push({ endMs: performance.now() - started, latencyMs: reply.latencyMs, outcome: scenario.outcomeOf(reply) });
      };
    }, concurrency);
  } finally {
    clearInterval(progress);
  }
  const wallMs = performance.now() - started;
  options.onProgress?.(samples.length, wallMs);
  const outcomes = countBy(samples, (s) => s.outcome);
  const errors = Object.fromEntries(Object.entries(outcomes).filter(([outcome]) => isErrorOutcome(outcome)));
  return {
    scenario: scenario.name,
    concurrency,
    requests: samples.length,
    wallMs,
    requestsPerSecond: (samples.length / wallMs) * 1000,
    latency: summarize(samples.map((s) => s.latencyMs)),
    outcomes,
    errors,
    violations: options.sql ? await scenario.check(options.sql, outcomes) : null,
    samples,
  };
}
