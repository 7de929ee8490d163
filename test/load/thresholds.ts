import type { LatencySummary } from './stats.js';

/**
 * Pass/fail criteria on the measured part of a run, as k6's thresholds and Artillery's `ensure`:
 * `p99<500` (ms), `max<2000`, `errors<1%`, `rate>300` (answers per second). A crossed threshold
 * makes the run exit 99.
 */

export type ThresholdMetric = 'p50' | 'p90' | 'p95' | 'p99' | 'max' | 'errors' | 'rate';

export interface Threshold {
  /** As given: `p99<500`. */
  expression: string;
  metric: ThresholdMetric;
  /** Milliseconds (latencies), a percentage (errors) or requests per second (rate). */
  limit: number;
}

export interface ThresholdVerdict extends Threshold {
  /** What the run measured, in the threshold's unit. */
  value: number;
  passed: boolean;
}

export class ThresholdError extends Error {}

const FORMS = /^(p50|p90|p95|p99|max)\s*<\s*(\d+(?:\.\d+)?)\s*(?:ms)?$|^(errors)\s*<\s*(\d+(?:\.\d+)?)\s*%$|^(rate)\s*>\s*(\d+(?:\.\d+)?)$/;

export function parseThreshold(expression: string): Threshold {
  const match = FORMS.exec(expression.trim());
  if (!match) {
    throw new ThresholdError(
      `a threshold is p50|p90|p95|p99|max<MS, errors<PCT% or rate>R (p99<500, errors<1%, rate>300), got "${expression}"`,
    );
  }
  const metric = (match[1] ?? match[3] ?? match[5]) as ThresholdMetric;
  const limit = Number(match[2] ?? match[4] ?? match[6]);
  if (metric === 'errors' && limit > 100) throw new ThresholdError(`errors<PCT% takes a percentage up to 100, got "${expression}"`);
  return { expression: expression.trim(), metric, limit };
}

/** What the thresholds are judged on: the measured part of the run. */
export interface MeasuredPart {
  latency: LatencySummary;
  /** Requests whose outcome is an error (unanswered ones at the end included). */
  errors: number;
  requests: number;
  /** Answers per second over the measured part. */
  requestsPerSecond: number;
}

export function valueOf(metric: ThresholdMetric, part: MeasuredPart): number {
  switch (metric) {
    case 'errors':
      return part.requests === 0 ? 0 : (part.errors / part.requests) * 100;
    case 'rate':
      return part.requestsPerSecond;
    default:
      return part.latency[metric];
  }
}

export function judge(thresholds: Threshold[], part: MeasuredPart): ThresholdVerdict[] {
  return thresholds.map((threshold) => {
    const value = valueOf(threshold.metric, part);
    const passed = threshold.metric === 'rate' ? value > threshold.limit : value < threshold.limit;
    return { ...threshold, value, passed };
  });
}

/** The measured part so far, while the run goes on. */
export interface PartSoFar {
  /** Latencies of the measured requests answered so far, ascending not required. */
  latencies: number[];
  /** The measured requests in flight, by how long each has waited so far (ms). */
  waiting: number[];
  errors: number;
  /** Measured requests still to be sent, when the run's size is known (null: a closed model for a duration). */
  toSend: number | null;
  /** Milliseconds since the measured part began. */
  elapsedMs: number;
  /** The measured part's length, when known (a duration); null for a request count. */
  lengthMs: number | null;
}

/**
 * The first threshold that no rest of the run can bring back, with the best case taken for
 * everything not yet answered (answered at once, without an error): `--abort-on-fail` stops there.
 * Only what is provable: with no known size (a closed model for a duration), more fast answers
 * could always pull a percentile or the error share back, so only `max` can be given up on early.
 */
export function beyondReach(thresholds: Threshold[], part: PartSoFar): Threshold | null {
  const answered = part.latencies.length;
  const inFlight = part.waiting.length;
  const total = part.toSend === null ? null : answered + inFlight + part.toSend;
  for (const threshold of thresholds) {
    if (lostFor(threshold, part, total, answered + inFlight)) return threshold;
  }
  return null;
}

function lostFor(threshold: Threshold, part: PartSoFar, total: number | null, started: number): boolean {
  const { metric, limit } = threshold;
  if (metric === 'max') return [...part.latencies, ...part.waiting].some((ms) => ms >= limit);
  if (metric === 'errors') return total !== null && total > 0 && (part.errors / total) * 100 >= limit;
  if (metric === 'rate') {
    // Every request still to come answered by the end: the most the measured part can reach.
    if (total === null) return false;
    const seconds = (part.lengthMs ?? part.elapsedMs) / 1000;
    return seconds > 0 && total / Math.max(seconds, part.elapsedMs / 1000) <= limit;
  }
  if (total === null || started === 0) return false;
  // The rest all answered at once: the fewest that can sit above the limit are those known to already.
  const slow = [...part.latencies, ...part.waiting].filter((ms) => ms >= limit).length;
  const fast = total - slow;
  const quantile = Number(metric.slice(1)) / 100;
  // Nearest rank: the percentile is below the limit only if at least ceil(q * total) values are.
  return fast < Math.ceil(quantile * total);
}
