import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { LoadClient, runLanes, type GraphQLReply } from './client.js';
import { liveFigures, RecentAnswers, type LiveFigures } from './live.js';
import { isErrorOutcome, NETWORK_ERROR, TIMED_OUT, violationsOf, type Amount, type InvariantCheck, type LoadScenario } from './scenario.js';
import type { Session } from './scenarios/coupons.js';
import { constantRate, type PlacedStage, type Schedule } from './schedule.js';
import { countBy, summarize, type LatencySummary } from './stats.js';
import { beyondReach, judge, type Threshold, type ThresholdVerdict } from './thresholds.js';

export interface Sample {
  /** Milliseconds after the release when the request was due: its place in the schedule (open model) or when it was sent. */
  dueMs: number;
  /** When it was sent; later than due only when the load generator itself fell behind. */
  sentMs: number;
  /** When it was answered (for one unanswered at the end: the end). */
  endMs: number;
  /** From due to answered: a request that waited for a stalled server counts its wait. */
  latencyMs: number;
  outcome: string;
  /** For NETWORK_ERROR: how the connection failed (ECONNREFUSED, ECONNRESET, socket hang up, ...). */
  networkFailure?: string;
  /** Bytes of the answer's body. */
  bytes?: number;
  /** Due during the warm-up: sent like the rest, left out of the summary and the thresholds. */
  warmup?: boolean;
}

/** The figures of one part of a run (the measured part, or the warm-up). */
export interface PartSummary {
  /** Every request of the part: answered, and unanswered at the end. */
  requests: number;
  latency: LatencySummary;
  outcomes: Record<string, number>;
  /** Outcomes that are error codes (upper-case codes that are not business statuses). */
  errors: Record<string, number>;
  /** NETWORK_ERROR by how the connection failed: a refused connection was never accepted, a reset lost an accepted request. */
  networkFailures: Record<string, number>;
  /** Bytes of the answers' bodies. */
  bytesReceived: number;
}

/** One second of the run, by when its requests were answered. */
export interface SecondFigures {
  /** 1 for the run's first second. */
  second: number;
  /** Answers in this second; `p50` to `p99` are theirs. */
  count: number;
  p50: number;
  p95: number;
  p99: number;
  /** Answers that were errors. */
  errors: number;
  /** Requests still unanswered when the run ended in this second (TIMED_OUT). */
  unanswered: number;
  /** The second began during the warm-up. */
  warmup: boolean;
  /** The open model: requests due in this second. */
  offered: number | null;
  /** With --stages: the stage the second began in (1 for the first). */
  stage: number | null;
}

export interface LoadResult extends PartSummary {
  scenario: string;
  /** Closed: `concurrency` requests kept in flight. Open: `offeredRate` requests per second on a fixed schedule. */
  model: 'closed' | 'open';
  /** Requests in flight (closed), or the most connections (open). */
  concurrency: number;
  /** The open model's constant rate; null for the closed model and for stages. */
  offeredRate: number | null;
  /** The open model's stages on the run's clock; null without --stages. */
  stages: PlacedStage[] | null;
  /** The warm-up's length; its requests are in `warmup`, not in the summary. */
  warmupMs: number;
  /** The measured part: from the end of the warm-up to the last answer, or to the end of the duration. */
  wallMs: number;
  /** Answers per second over the measured part. */
  requestsPerSecond: number;
  /** Requests still unanswered when the run ended (its duration, or an abort): counted as TIMED_OUT. */
  timedOut: number;
  /**
   * The open model: requests due in the measured part that were never sent, because the load
   * generator fell that far behind its schedule before the run ended (0 when it kept up).
   */
  notSent: number;
  warmup: PartSummary | null;
  perSecond: SecondFigures[];
  thresholds: ThresholdVerdict[];
  /** Set when --abort-on-fail stopped the run: when, and which threshold could no longer be met. */
  aborted: { atMs: number; threshold: string } | null;
  /** Every invariant checked in SQL with its counts; null when no database was given. */
  checks: InvariantCheck[] | null;
  /** What broke, one line each (empty: every invariant held); null when nothing was checked. */
  violations: string[] | null;
  samples: Sample[];
}

export { isErrorOutcome, NETWORK_ERROR, TIMED_OUT };

/** How a request's connection failed, in the words a client library reports it. */
export function networkFailureOf(error: unknown): string {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  // Node reports a connection closed before any answer as ECONNRESET with this message.
  if (typeof message === 'string' && /socket hang up/.test(message)) return 'socket hang up';
  return typeof code === 'string' ? code : String(message ?? error);
}

export interface RunOptions {
  client: LoadClient;
  sessions: Session;
  scenario: LoadScenario;
  concurrency: number;
  /** How much is measured: a request count, or a duration (after the warm-up). */
  amount: Amount;
  /**
   * Open model: this many requests per second, each sent at its time whatever the server does
   * (`concurrency` is then the most connections; a request waiting for one counts the wait).
   * Without it (and without `schedule`), the closed model: `concurrency` requests in flight, the
   * next sent when one ends.
   */
  rate?: number | null;
  /** Open model with stages (ramps of the arrival rate); takes the place of `rate`. */
  schedule?: Schedule | null;
  /** The first milliseconds of the run are warm-up: sent, but left out of the summary and the thresholds. */
  warmupMs?: number;
  thresholds?: Threshold[];
  /** Stop at the first second a threshold can no longer be met. */
  abortOnFail?: boolean;
  /** After the end of a duration, how long answers still due may take to come in for the invariant check. */
  settleMs?: number;
  /** The database to count invariants in; null skips the check. */
  sql: pg.Pool | null;
  onProgress?: (done: number, elapsedMs: number) => void;
  /** Told every 250 ms what the run looks like now: the rate and latency of the last second, errors, in flight. */
  onLive?: (live: LiveFigures) => void;
  /** Told of every answer as it arrives (the bench reads the budget when the first refusal comes). */
  onAnswer?: (outcome: string) => void;
}

const TICK_MS = 250;
/** How long answers due at the end of a duration may still take before the invariants are counted without them. */
const DEFAULT_SETTLE_MS = 30_000;

/** A request on its way: when it started counting, and whether it belongs to the warm-up. */
interface InFlight {
  startMs: number;
  sentMs: number;
  warmup: boolean;
}

/**
 * Sets the scenario up, opens every connection, and starts the clock; then either keeps
 * `concurrency` requests in flight (closed model) or sends on a schedule (open model: a constant
 * rate or stages), until the request count or the duration runs out. A duration is kept: what is
 * unanswered when it ends counts as TIMED_OUT at that moment, and answers that come later only
 * tell the invariant check what they did. Then counts the invariants in SQL.
 */
export async function runLoad(options: RunOptions): Promise<LoadResult> {
  const { client, sessions, scenario } = options;
  await scenario.setup(client, sessions);
  await client.open();
  const run = new Run(options);
  const ending = await run.go();
  const checkOutcomes = await run.settle(ending, options.settleMs ?? DEFAULT_SETTLE_MS);
  const checks = options.sql ? await scenario.check(options.sql, checkOutcomes) : null;
  return { ...run.result(), checks, violations: checks ? violationsOf(checks) : null };
}

type Ending = { kind: 'done' } | { kind: 'duration' } | { kind: 'aborted'; threshold: Threshold };

/** One run's clock, requests and samples. */
class Run {
  readonly samples: Sample[] = [];
  private readonly inFlight = new Map<number, InFlight>();
  /** Unanswered at the end, by index; their answers, when they come later, go to `late`. */
  private readonly timedOut = new Map<number, Sample>();
  private readonly late = new Map<number, string>();
  private readonly recent = new RecentAnswers();
  private readonly schedule: Schedule | null;
  private readonly warmupMs: number;
  private readonly deadlineMs: number;
  private readonly limit: number;
  private measuredSent = 0;
  private stopping = false;
  private started = 0;
  private endMs = 0;
  private aborted: LoadResult['aborted'] = null;
  private sending: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: RunOptions) {
    this.schedule = options.schedule ?? (options.rate ? constantRate(options.rate) : null);
    this.warmupMs = options.warmupMs ?? 0;
    const { amount } = options;
    this.deadlineMs = 'durationSeconds' in amount ? this.warmupMs + amount.durationSeconds * 1000 : Infinity;
    this.limit = 'requests' in amount ? amount.requests : Infinity;
  }

  private now(): number {
    return performance.now() - this.started;
  }

  /** Sends until the amount is spent and every answer is in, the duration ends, or a threshold is out of reach. */
  async go(): Promise<Ending> {
    this.started = performance.now();
    let stop!: (ending: Ending) => void;
    const stopped = new Promise<Ending>((resolve) => (stop = resolve));
    const deadline = Number.isFinite(this.deadlineMs) ? setTimeout(() => stop({ kind: 'duration' }), this.deadlineMs) : null;
    let ticks = 0;
    const ticker = setInterval(() => {
      ticks++;
      this.options.onProgress?.(this.samples.length, this.now());
      this.options.onLive?.(this.live());
      const out = ticks % (1000 / TICK_MS) === 0 ? this.outOfReach() : null;
      if (out) stop({ kind: 'aborted', threshold: out });
    }, TICK_MS);
    this.sending = this.schedule
      ? runOnSchedule((index, dueMs) => this.next(index, dueMs), this.schedule, this.started)
      : runLanes((index) => this.next(index, null), this.options.concurrency);
    const ending = await Promise.race([this.sending.then((): Ending => ({ kind: 'done' })), stopped]);
    this.stopping = true;
    clearInterval(ticker);
    if (deadline) clearTimeout(deadline);
    this.end(ending);
    this.options.onProgress?.(this.samples.length, this.now());
    return ending;
  }

  /** The next request to send, or null: the amount is spent or the run is stopping. */
  private next(index: number, dueMs: number | null): (() => Promise<void>) | null {
    if (this.stopping) return null;
    const at = dueMs ?? this.now();
    if (at >= this.deadlineMs) return null;
    const warmup = at < this.warmupMs;
    if (!warmup && this.measuredSent >= this.limit) return null;
    const task = this.options.scenario.request(index, this.options.client, this.options.sessions);
    if (task === null) return null;
    if (!warmup) this.measuredSent++;
    return () => this.send(index, dueMs ?? Infinity, warmup, task);
  }

  private async send(index: number, dueMs: number, warmup: boolean, task: () => Promise<GraphQLReply>): Promise<void> {
    // Scheduled before the run ended, due after: never sent.
    if (this.stopping) return;
    const sentMs = this.now();
    const startMs = Math.min(dueMs, sentMs);
    this.inFlight.set(index, { startMs, sentMs, warmup });
    let networkFailure: string | undefined;
    const reply = await task().catch((error: unknown): GraphQLReply | null => {
      networkFailure = networkFailureOf(error);
      return null;
    });
    const endMs = this.now();
    const outcome = reply === null ? NETWORK_ERROR : this.options.scenario.outcomeOf(reply);
    // Timed out at the end already: its answer only tells the invariant check what it did.
    if (!this.inFlight.delete(index)) return void this.late.set(index, outcome);
    this.options.onAnswer?.(outcome);
    this.recent.add(endMs, endMs - startMs, outcome);
    this.samples.push({
      dueMs: startMs,
      sentMs,
      endMs,
      latencyMs: endMs - startMs,
      outcome,
      bytes: reply?.bytes ?? 0,
      warmup,
      ...(networkFailure ? { networkFailure } : {}),
    });
  }

  /** The run ends: what is still unanswered after a duration or an abort is TIMED_OUT now. */
  private end(ending: Ending): void {
    this.endMs = ending.kind === 'duration' ? this.deadlineMs : this.now();
    if (ending.kind === 'aborted') this.aborted = { atMs: this.endMs, threshold: ending.threshold.expression };
    for (const [index, request] of this.inFlight) {
      const sample = {
        dueMs: request.startMs,
        sentMs: request.sentMs,
        endMs: this.endMs,
        latencyMs: this.endMs - request.startMs,
        outcome: TIMED_OUT,
        bytes: 0,
        warmup: request.warmup,
      };
      this.samples.push(sample);
      this.timedOut.set(index, sample);
    }
    this.inFlight.clear();
  }

  /**
   * The outcomes the invariants are judged with: every request's, a timed-out one's as it finally
   * came (within `settleMs`), TIMED_OUT when it never did: it may or may not have acted.
   */
  async settle(ending: Ending, settleMs: number): Promise<Record<string, number>> {
    if (ending.kind !== 'done' && this.timedOut.size > 0) await Promise.race([this.sending, sleep(settleMs)]);
    const outcomes = countBy(this.samples, (sample) => sample.outcome);
    for (const [index] of this.timedOut) {
      const outcome = this.late.get(index);
      if (outcome === undefined) continue;
      outcomes[TIMED_OUT]! -= 1;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    if (outcomes[TIMED_OUT] === 0) delete outcomes[TIMED_OUT];
    return outcomes;
  }

  private live(): LiveFigures {
    return liveFigures({
      elapsedMs: this.now(),
      warmupMs: this.warmupMs,
      schedule: this.schedule,
      recent: this.recent,
      inFlight: this.inFlight.size,
      answered: this.samples.length,
    });
  }

  /** With --abort-on-fail: the first threshold the measured part can no longer meet. */
  private outOfReach(): Threshold | null {
    const { thresholds = [], abortOnFail } = this.options;
    const elapsedMs = this.now();
    if (!abortOnFail || thresholds.length === 0 || elapsedMs < this.warmupMs) return null;
    const measured = this.samples.filter((sample) => !sample.warmup);
    const waiting = [...this.inFlight.values()].filter((request) => !request.warmup).map((request) => elapsedMs - request.startMs);
    return beyondReach(thresholds, {
      latencies: measured.map((sample) => sample.latencyMs),
      waiting,
      errors: measured.filter((sample) => isErrorOutcome(sample.outcome)).length,
      toSend: this.toSend(elapsedMs),
      elapsedMs: elapsedMs - this.warmupMs,
      lengthMs: Number.isFinite(this.deadlineMs) ? this.deadlineMs - this.warmupMs : null,
    });
  }

  /** Measured requests still to be sent, when the run's size says; null when it does not (a closed model for a duration). */
  private toSend(elapsedMs: number): number | null {
    if (Number.isFinite(this.limit)) return this.limit - this.measuredSent;
    if (this.schedule === null) return null;
    return this.schedule.dueBetween(Math.max(elapsedMs, this.warmupMs), Math.min(this.deadlineMs, this.schedule.endMs));
  }

  result(): Omit<LoadResult, 'checks' | 'violations'> {
    const { options, schedule } = this;
    const measured = this.samples.filter((sample) => !sample.warmup);
    const warmup = this.samples.filter((sample) => sample.warmup);
    const wallMs = Math.max(0, this.endMs - this.warmupMs);
    const answered = measured.filter((sample) => sample.outcome !== TIMED_OUT).length;
    const part = partSummary(measured);
    const requestsPerSecond = wallMs > 0 ? (answered / wallMs) * 1000 : 0;
    const errors = Object.values(part.errors).reduce((sum, count) => sum + count, 0);
    return {
      scenario: options.scenario.name,
      model: schedule === null ? 'closed' : 'open',
      concurrency: options.concurrency,
      offeredRate: options.schedule ? null : (options.rate ?? null),
      stages: options.schedule ? options.schedule.stages : null,
      warmupMs: this.warmupMs,
      ...part,
      wallMs,
      requestsPerSecond,
      timedOut: this.timedOut.size,
      notSent: this.notSent(measured.length),
      warmup: this.warmupMs > 0 ? partSummary(warmup) : null,
      perSecond: perSecond(this.samples, this.endMs, this.warmupMs, schedule),
      thresholds: judge(options.thresholds ?? [], { latency: part.latency, errors, requests: part.requests, requestsPerSecond }),
      aborted: this.aborted,
      samples: this.samples,
    };
  }

  /** What the schedule had due in the measured part, up to the run's end and its request count, that was never sent. */
  private notSent(sent: number): number {
    if (this.schedule === null) return 0;
    const due = this.schedule.dueBetween(this.warmupMs, Math.min(this.endMs, this.schedule.endMs));
    return Math.max(0, Math.min(this.limit, due) - sent);
  }
}

export function partSummary(samples: Sample[]): PartSummary {
  const outcomes = countBy(samples, (s) => s.outcome);
  return {
    requests: samples.length,
    latency: summarize(samples.map((s) => s.latencyMs)),
    outcomes,
    errors: Object.fromEntries(Object.entries(outcomes).filter(([outcome]) => isErrorOutcome(outcome))),
    networkFailures: countBy(
      samples.filter((s) => s.networkFailure !== undefined),
      (s) => s.networkFailure!,
    ),
    bytesReceived: samples.reduce((sum, s) => sum + (s.bytes ?? 0), 0),
  };
}

/** The run second by second, by when each request was answered (or left unanswered at the end, apart). */
export function perSecond(samples: Sample[], endMs: number, warmupMs: number, schedule: Schedule | null): SecondFigures[] {
  const count = Math.max(1, Math.ceil(endMs / 1000));
  const buckets: Sample[][] = Array.from({ length: count }, () => []);
  for (const sample of samples) buckets[Math.min(count - 1, Math.floor(sample.endMs / 1000))]!.push(sample);
  const staged = schedule !== null && Number.isFinite(schedule.endMs);
  return buckets.map((ended, i) => {
    const answers = ended.filter((s) => s.outcome !== TIMED_OUT);
    const latency = summarize(answers.map((s) => s.latencyMs));
    return {
      second: i + 1,
      count: answers.length,
      p50: latency.p50,
      p95: latency.p95,
      p99: latency.p99,
      errors: answers.filter((s) => isErrorOutcome(s.outcome)).length,
      unanswered: ended.length - answers.length,
      warmup: i * 1000 < warmupMs,
      offered: schedule ? schedule.dueBetween(i * 1000, Math.min((i + 1) * 1000, schedule.endMs)) : null,
      stage: staged ? schedule.stages.findIndex((stage) => i * 1000 < stage.endMs) + 1 || schedule.stages.length : null,
    };
  });
}

/**
 * The open model's clock: request i is due at the schedule's time for it (`i / rate` seconds after
 * `started` for a constant rate) and is sent then, without waiting for any answer, so a slow server
 * meets the same arrivals as a fast one and its queue shows in the latencies instead of lowering
 * the load (no coordinated omission). Resolves once every request sent has been answered.
 */
export async function runOnSchedule(
  next: (index: number, dueMs: number) => (() => Promise<void>) | null,
  rate: number | Schedule,
  started: number,
): Promise<void> {
  const schedule = typeof rate === 'number' ? constantRate(rate) : rate;
  const inFlight = new Set<Promise<void>>();
  for (let index = 0; ; index++) {
    const dueMs = schedule.dueMs(index);
    if (dueMs === null) break;
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
