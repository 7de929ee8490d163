/**
 * A small discrete-event engine: processes are generators that yield what they wait for (a delay,
 * a unit of a resource, some work on cores shared by processor sharing) and
 * are resumed, in time order, when it is theirs. Same inputs, same run: ties are broken by the
 * order events were scheduled.
 */

type Wait = { delay: number } | { acquire: Resource } | { compute: Cores; ms: number } | { until: Signal };
export type Process = Generator<Wait, void, void>;

interface Event {
  at: number;
  seq: number;
  resume: () => void;
}

/** A binary heap of events by time, then by scheduling order. */
class Agenda {
  private readonly heap: Event[] = [];

  get size() {
    return this.heap.length;
  }

  push(event: Event) {
    const heap = this.heap;
    heap.push(event);
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  pop(): Event {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
        if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

const before = (a: Event, b: Event) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/** Units (a thread, connections, a row's lock) granted first come, first served. */
export class Resource {
  inUse = 0;
  private readonly waiting: (() => void)[] = [];
  /** Time-weighted units in use, for utilisation. */
  private busyIntegral = 0;
  private lastChange = 0;

  constructor(
    private readonly sim: Simulation,
    readonly units: number,
    readonly name = 'resource',
  ) {}

  get queued() {
    return this.waiting.length;
  }

  private account() {
    this.busyIntegral += this.inUse * (this.sim.now - this.lastChange);
    this.lastChange = this.sim.now;
  }

  /** Takes a unit now if one is free. */
  tryAcquire(): boolean {
    if (this.inUse >= this.units) return false;
    this.account();
    this.inUse++;
    return true;
  }

  enqueue(granted: () => void) {
    if (this.tryAcquire()) this.sim.soon(granted);
    else this.waiting.push(granted);
  }

  release() {
    this.account();
    const next = this.waiting.shift();
    if (next) this.sim.soon(next);
    else this.inUse--;
  }

  /** Mean units in use since the start. */
  utilisation(): number {
    this.account();
    return this.sim.now > 0 ? this.busyIntegral / this.sim.now : 0;
  }
}

/** A moment processes wait for (a batch's turn): those waiting resume, in the order they came, once it is fired. */
export class Signal {
  private readonly waiting: (() => void)[] = [];
  private fired = false;

  constructor(private readonly sim: Simulation) {}

  wait(resume: () => void) {
    if (this.fired) this.sim.soon(resume);
    else this.waiting.push(resume);
  }

  fire() {
    if (this.fired) return;
    this.fired = true;
    for (const resume of this.waiting.splice(0)) this.sim.soon(resume);
  }
}

/**
 * Cores shared by processor sharing, as an operating system's scheduler shares them among the
 * threads that can run: n jobs on `cores` (fractional: what other users of a machine leave) each
 * progress at min(1, cores / n) ms of work per ms. A job that waits here while it holds a lock
 * holds the lock that much longer.
 */
export class Cores {
  private readonly jobs: { remaining: number; done: () => void }[] = [];
  private lastChange = 0;
  private busyIntegral = 0;
  /** Only the newest completion event is live: every arrival or departure reschedules. */
  private version = 0;

  constructor(
    private readonly sim: Simulation,
    readonly cores: number,
    readonly name = 'cores',
  ) {}

  get running() {
    return this.jobs.length;
  }

  private rate() {
    return Math.min(1, this.cores / this.jobs.length);
  }

  /** Brings every job's remaining work up to now. */
  private advance() {
    const elapsed = this.sim.now - this.lastChange;
    if (elapsed > 0 && this.jobs.length > 0) {
      const done = elapsed * this.rate();
      for (const job of this.jobs) job.remaining -= done;
      this.busyIntegral += elapsed * Math.min(this.cores, this.jobs.length);
    }
    this.lastChange = this.sim.now;
  }

  private schedule() {
    const version = ++this.version;
    if (this.jobs.length === 0) return;
    const next = this.jobs.reduce((least, job) => Math.min(least, job.remaining), Infinity);
    this.sim.at(this.sim.now + Math.max(0, next) / this.rate(), () => {
      if (version !== this.version) return;
      this.advance();
      // Jobs whose work is done within rounding leave together, in the order they came.
      const finished = this.jobs.filter((job) => job.remaining <= 1e-9);
      for (const job of finished) this.jobs.splice(this.jobs.indexOf(job), 1);
      this.schedule();
      for (const job of finished) this.sim.soon(job.done);
    });
  }

  /** Starts `ms` of work; `done` runs when it is finished. */
  submit(ms: number, done: () => void) {
    if (!(ms > 0)) {
      this.sim.soon(done);
      return;
    }
    this.advance();
    this.jobs.push({ remaining: ms, done });
    this.schedule();
  }

  /** Mean cores busy since the start. */
  utilisation(): number {
    this.advance();
    return this.sim.now > 0 ? this.busyIntegral / this.sim.now : 0;
  }
}

export class Simulation {
  now = 0;
  private seq = 0;
  private readonly agenda = new Agenda();
  private halted = false;

  /** Ends the run at once (a model that has fallen hopelessly behind). */
  halt() {
    this.halted = true;
  }

  at(at: number, resume: () => void) {
    this.agenda.push({ at, seq: this.seq++, resume });
  }

  soon(resume: () => void) {
    this.at(this.now, resume);
  }

  /** Starts a process now; it runs until its generator returns. */
  start(process: Process, done?: () => void) {
    const step = () => {
      const next = process.next();
      if (next.done) {
        done?.();
        return;
      }
      const wait = next.value;
      if ('delay' in wait) this.at(this.now + Math.max(0, wait.delay), step);
      else if ('acquire' in wait) wait.acquire.enqueue(step);
      else if ('until' in wait) wait.until.wait(step);
      else wait.compute.submit(wait.ms, step);
    };
    this.soon(step);
  }

  /** Runs until nothing is scheduled, or until `until` ms. */
  run(until = Infinity) {
    while (this.agenda.size > 0 && !this.halted) {
      const event = this.agenda.pop();
      if (event.at > until) break;
      this.now = event.at;
      event.resume();
    }
  }
}

/** Seeded pseudo-random numbers (mulberry32), so that a run can be repeated. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
