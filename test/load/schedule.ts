/**
 * The open model's arrivals: a constant rate, or stages that ramp the rate linearly from where the
 * last one ended to their own target (k6's ramping arrival rate). Request i is due when the
 * arrivals offered so far reach i, so a ramp sends as a steady rate would at each instant.
 */

export interface Stage {
  durationMs: number;
  /** Requests per second at the stage's end; it starts at the previous stage's. */
  target: number;
}

/** One stage placed on the run's clock. */
export interface PlacedStage {
  startMs: number;
  endMs: number;
  fromRate: number;
  toRate: number;
}

export interface Schedule {
  /** Stages on the run's clock; one open-ended stage for a constant rate. */
  stages: PlacedStage[];
  /** When the last stage ends (Infinity for a constant rate). */
  endMs: number;
  /** Milliseconds after the start at which request `index` is due; null past the last stage. */
  dueMs(index: number): number | null;
  /** The offered rate (requests/s) at `ms`. */
  rateAt(ms: number): number;
  /** Requests due from `fromMs` up to (not including) `toMs`. */
  dueBetween(fromMs: number, toMs: number): number;
}

export function constantRate(rate: number): Schedule {
  return {
    stages: [{ startMs: 0, endMs: Infinity, fromRate: rate, toRate: rate }],
    endMs: Infinity,
    dueMs: (index) => (index * 1000) / rate,
    rateAt: () => rate,
    dueBetween: (fromMs, toMs) => Math.max(0, Math.ceil((toMs * rate) / 1000) - Math.ceil((fromMs * rate) / 1000)),
  };
}

/** Arrivals offered within a stage in its first `ms` milliseconds. */
function arrivalsWithin(stage: PlacedStage, ms: number): number {
  const seconds = ms / 1000;
  const slope = (stage.toRate - stage.fromRate) / ((stage.endMs - stage.startMs) / 1000);
  return stage.fromRate * seconds + (slope * seconds * seconds) / 2;
}

/** The time into a stage at which `arrivals` have been offered (the root of a t^2 / 2 + r0 t = n). */
function timeForArrivals(stage: PlacedStage, arrivals: number): number {
  if (arrivals <= 0) return 0;
  const slope = (stage.toRate - stage.fromRate) / ((stage.endMs - stage.startMs) / 1000);
  // The stable form of the quadratic's root: no cancellation when the slope is tiny or zero.
  const seconds = (2 * arrivals) / (stage.fromRate + Math.sqrt(Math.max(0, stage.fromRate ** 2 + 2 * slope * arrivals)));
  return seconds * 1000;
}

export function stagedRate(stages: Stage[], startRate = 0): Schedule {
  const placed: PlacedStage[] = [];
  let at = 0;
  let rate = startRate;
  for (const stage of stages) {
    placed.push({ startMs: at, endMs: at + stage.durationMs, fromRate: rate, toRate: stage.target });
    at += stage.durationMs;
    rate = stage.target;
  }
  // Arrivals offered before each stage begins.
  const before: number[] = [];
  let offered = 0;
  for (const stage of placed) {
    before.push(offered);
    offered += arrivalsWithin(stage, stage.endMs - stage.startMs);
  }
  const arrivalsBy = (ms: number) => {
    const i = placed.findIndex((stage) => ms < stage.endMs);
    if (i < 0) return offered;
    return before[i]! + arrivalsWithin(placed[i]!, ms - placed[i]!.startMs);
  };
  return {
    stages: placed,
    endMs: at,
    dueMs(index) {
      if (index >= offered) return null;
      const i = placed.findIndex((_, k) => k === placed.length - 1 || before[k + 1]! > index);
      return placed[i]!.startMs + timeForArrivals(placed[i]!, index - before[i]!);
    },
    rateAt(ms) {
      const stage = placed.find((s) => ms < s.endMs) ?? placed.at(-1)!;
      const share = Math.min(1, Math.max(0, (ms - stage.startMs) / (stage.endMs - stage.startMs)));
      return stage.fromRate + (stage.toRate - stage.fromRate) * share;
    },
    dueBetween: (fromMs, toMs) => Math.max(0, Math.ceil(arrivalsBy(toMs)) - Math.ceil(arrivalsBy(fromMs))),
  };
}

export class StagesError extends Error {}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m)?$/;

/** `10s:100,30s:400,10s:0`: each stage's duration (ms, s or m; seconds without a unit) and its target rate. */
export function parseStages(text: string): Stage[] {
  const stages = text.split(',').map((part) => {
    const [duration, target] = part.trim().split(':');
    const match = DURATION.exec(duration ?? '');
    const rate = Number(target);
    if (!match || target === undefined || target.trim() === '' || !Number.isFinite(rate) || rate < 0) {
      throw new StagesError(`a stage is DURATION:RATE (10s:100, 1m:400), got "${part.trim()}"`);
    }
    const unit = match[2] ?? 's';
    const durationMs = Number(match[1]) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : 60_000);
    if (durationMs <= 0) throw new StagesError(`a stage lasts longer than 0, got "${part.trim()}"`);
    return { durationMs, target: rate };
  });
  if (!stages.some((stage) => stage.target > 0)) throw new StagesError('the stages offer no request: every target is 0');
  return stages;
}
