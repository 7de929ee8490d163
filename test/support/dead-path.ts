import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import type pg from 'pg';
import { CreateContractDocumentDocument } from '../generated/graphql.js';
import { LoadClient } from '../load/client.js';
import { runOnSchedule } from '../load/run.js';
import { percentile } from '../load/stats.js';

/**
 * The dead-path trials (test/dead-path.slow.test.ts, and `tsx test/load/dead-path.ts` for the figures at
 * the default settings): createContractDocument sent on a fixed schedule, each with a key of its
 * own, whatever the server does, so that a stall shows as latency and every answer can be
 * checked against the table afterwards.
 */

export interface Trial {
  graphqlUrl: string;
  /** A pool straight to PostgreSQL, past the fault proxy: for counting. */
  sql: pg.Pool;
  tenantId: string;
  contractId: string;
}

export interface Sample {
  key: string;
  /** ms after the load started */
  sentMs: number;
  latencyMs: number;
  /** OK, or the error code (NETWORK when no answer came) */
  code: string;
  /** extensions.reason of a TRY_AGAIN: which limit ran out */
  reason: string | null;
  retryAfter: string | null;
}

const QUERY = print(CreateContractDocumentDocument);

export function memberHeaders(tenantId: string): Record<string, string> {
  return { 'x-hasura-role': 'user', 'x-hasura-tenant-id': tenantId, 'x-hasura-user-id': 'writer' };
}

export async function sendDocument(client: LoadClient, trial: Trial, key: string): Promise<Omit<Sample, 'sentMs' | 'key'>> {
  const started = performance.now();
  try {
    const reply = await client.graphql(
      QUERY,
      { input: { contractId: trial.contractId } },
      { ...memberHeaders(trial.tenantId), 'idempotency-key': key },
    );
    const error = reply.body.errors?.[0];
    const code = String(error?.extensions?.['code'] ?? (reply.body.data ? 'OK' : `HTTP_${reply.status}`));
    const reason = error?.extensions?.['reason'];
    const retryAfter = reply.headers['retry-after'];
    return {
      latencyMs: performance.now() - started,
      code,
      reason: typeof reason === 'string' ? reason : null,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
    };
  } catch {
    return { latencyMs: performance.now() - started, code: 'NETWORK', reason: null, retryAfter: null };
  }
}

export interface LoadRun {
  /** performance.now() when the schedule started. */
  started: number;
  done: Promise<Sample[]>;
  /** Moves the end of the schedule (ms after `started`): a trial that learns its timings as it runs. */
  endAt(durationMs: number): void;
}

/**
 * Sends at `rate` per second for `durationMs` (Infinity: until `endAt`), starting now; `done`
 * resolves once every request has its answer, and `onSample` hears of each answer as it comes.
 */
export function loadAtRate(
  client: LoadClient,
  trial: Trial,
  rate: number,
  durationMs: number,
  tag: string,
  onSample?: (sample: Sample) => void,
): LoadRun {
  const started = performance.now();
  const samples: Sample[] = [];
  let endMs = durationMs;
  const done = runOnSchedule(
    (index, dueMs) =>
      dueMs >= endMs
        ? null
        : async () => {
            const key = `${tag}-${index}`;
            const sentMs = performance.now() - started;
            const sample = { key, sentMs, ...(await sendDocument(client, trial, key)) };
            samples.push(sample);
            onSample?.(sample);
          },
    rate,
    started,
  ).then(() => samples.sort((a, b) => a.sentMs - b.sentMs));
  return { started, done, endAt: (ms) => (endMs = ms) };
}

/** GET /ready every `everyMs` until stopped: (ms after `started`, status). */
export function pollReady(readyUrl: string, started: number, everyMs = 100) {
  const seen: { atMs: number; status: number }[] = [];
  let stopped = false;
  const running = (async () => {
    while (!stopped) {
      const status = await fetch(readyUrl, { signal: AbortSignal.timeout(5_000) })
        .then((response) => response.status)
        .catch(() => 0);
      seen.push({ atMs: performance.now() - started, status });
      await sleep(everyMs);
    }
  })();
  return {
    started,
    seen,
    async stop() {
      stopped = true;
      await running;
      return seen;
    },
  };
}

/** Latency figures of a set of samples, in ms, for the test's output and the report. */
export function figures(samples: Sample[]) {
  const sorted = samples.map((s) => s.latencyMs).sort((a, b) => a - b);
  const codes: Record<string, number> = {};
  const reasons: Record<string, number> = {};
  for (const s of samples) {
    codes[s.code] = (codes[s.code] ?? 0) + 1;
    if (s.reason) reasons[s.reason] = (reasons[s.reason] ?? 0) + 1;
  }
  return {
    count: samples.length,
    p50: Math.round(percentile(sorted, 50)),
    p99: Math.round(percentile(sorted, 99)),
    max: Math.round(sorted.at(-1) ?? 0),
    codes,
    reasons,
  };
}

/**
 * Nothing lost, nothing doubled: every OK answer's key made one document, and resending every
 * other key with the same Idempotency-Key completes it exactly once; the tenant's numbers then run
 * without a gap. Returns the problems found (none when everything holds).
 */
export async function checkNothingLost(client: LoadClient, trial: Trial, samples: Sample[]): Promise<string[]> {
  const problems: string[] = [];
  for (const sample of samples.filter((s) => s.code !== 'OK')) {
    for (let attempt = 0; ; attempt++) {
      const { code } = await sendDocument(client, trial, sample.key);
      if (code === 'OK') break;
      if (code !== 'TRY_AGAIN' || attempt >= 20) {
        problems.push(`the resend of ${sample.key} answered ${code}`);
        break;
      }
      await sleep(250);
    }
  }
  const { rows } = await trial.sql.query<{ doc_number: number }>(
    'select doc_number from contract_documents where tenant_id = $1 order by doc_number',
    [trial.tenantId],
  );
  if (rows.length !== samples.length) problems.push(`${rows.length} documents for ${samples.length} keys`);
  const broken = rows.findIndex((row, i) => row.doc_number !== 10_000_000 + i);
  if (broken >= 0) problems.push(`number ${rows[broken]!.doc_number} where ${10_000_000 + broken} belongs`);
  return problems;
}
