import { isErrorOutcome } from './scenario.js';
import type { Schedule } from './schedule.js';
import { percentile } from './stats.js';

/** What a run looks like while it goes on: the CLI's progress line. */
export interface LiveFigures {
  elapsedMs: number;
  /** Still in the warm-up. */
  warmup: boolean;
  /** With stages: the stage now (1 for the first) of how many. */
  stage: { index: number; of: number } | null;
  /** The open model: the rate offered now. */
  offeredRate: number | null;
  /** Answers in the last second, and their latency. */
  lastSecond: { answers: number; p50: number; p99: number };
  /** Error answers so far, by code. */
  errors: Record<string, number>;
  inFlight: number;
  answered: number;
}

/** The answers of the last second, and every error code so far. */
export class RecentAnswers {
  private readonly window: { endMs: number; latencyMs: number }[] = [];
  readonly errors: Record<string, number> = {};

  add(endMs: number, latencyMs: number, outcome: string): void {
    this.window.push({ endMs, latencyMs });
    if (isErrorOutcome(outcome)) this.errors[outcome] = (this.errors[outcome] ?? 0) + 1;
  }

  /** The answers of the second before `nowMs`. */
  lastSecond(nowMs: number): number[] {
    while (this.window.length > 0 && this.window[0]!.endMs < nowMs - 1000) this.window.shift();
    return this.window.map((answer) => answer.latencyMs);
  }
}

export function liveFigures(run: {
  elapsedMs: number;
  warmupMs: number;
  schedule: Schedule | null;
  recent: RecentAnswers;
  inFlight: number;
  answered: number;
}): LiveFigures {
  const latencies = run.recent.lastSecond(run.elapsedMs).sort((a, b) => a - b);
  const staged = run.schedule !== null && Number.isFinite(run.schedule.endMs) ? run.schedule : null;
  const stageIndex = staged ? staged.stages.findIndex((stage) => run.elapsedMs < stage.endMs) : -1;
  return {
    elapsedMs: run.elapsedMs,
    warmup: run.elapsedMs < run.warmupMs,
    stage: staged ? { index: (stageIndex < 0 ? staged.stages.length - 1 : stageIndex) + 1, of: staged.stages.length } : null,
    offeredRate: run.schedule ? run.schedule.rateAt(run.elapsedMs) : null,
    lastSecond: { answers: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    errors: { ...run.recent.errors },
    inFlight: run.inFlight,
    answered: run.answered,
  };
}

/** One progress line: `12.3 s  measured  412/s  p50 8.1 ms  p99 41.0 ms  in flight 3  errors TRY_AGAIN 2`. */
export function liveLine(live: LiveFigures): string {
  const phase = live.warmup ? 'warm-up ' : 'measured';
  const stage = live.stage ? `  stage ${live.stage.index}/${live.stage.of}` : '';
  const offered = live.offeredRate !== null ? ` (offered ${live.offeredRate.toFixed(0)}/s)` : '';
  const errors = Object.entries(live.errors)
    .map(([code, count]) => `${code} ${count}`)
    .join(', ');
  return (
    `  ${(live.elapsedMs / 1000).toFixed(1).padStart(6)} s  ${phase}${stage}  ${live.lastSecond.answers}/s${offered}` +
    `  p50 ${live.lastSecond.p50.toFixed(1)} ms  p99 ${live.lastSecond.p99.toFixed(1)} ms` +
    `  in flight ${live.inFlight}  answered ${live.answered}  errors ${errors || 'none'}`
  );
}
