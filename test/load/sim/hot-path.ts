import { random, Resource, Simulation, type Process } from './engine.js';

/**
 * The hot path of issueCoupon as a queueing model: clients, server processes (a core each), their
 * connection pools, the network round trip, PostgreSQL's cores, and the budget rows whose locks
 * every issue queues on. The designs:
 *
 * - `slots`: one statement (docs/design.md §4); an issue takes a free budget row with room (SKIP
 *   LOCKED), else waits for one with room; the row is held for `holdMs` (the rest of the statement and
 *   its commit), never across a round trip.
 * - `leases`: one statement; a lease row per process, topped up from the budget row when it runs
 *   below half; an issue takes its own lease, else any free lease, else the budget row, else waits.
 * - `serializable`: the read-check-write transaction at SERIALIZABLE, one round trip per statement;
 *   an update of the budget row that another transaction committed after this one's snapshot fails
 *   (40001), and the whole transaction is retried after a full-jitter pause, at most 8 attempts.
 * - `not hot`: one statement, and the budget rows never contended (the reference campaigns).
 */
export type Design =
  { kind: 'slots'; rows: number } | { kind: 'leases'; leaseCoupons: number } | { kind: 'serializable' } | { kind: 'not hot' };

/** What one request costs, in ms. */
export interface Costs {
  /** CPU of the server process per request. */
  appCpuMs: number;
  /** CPU of PostgreSQL per request (one statement); the serializable transaction spends it over its statements. */
  dbCpuMs: number;
  /** The budget row's hold per issue in the one-statement designs (the rest of the statement and its commit). */
  holdMs: number;
  /** The commit's own time (its WAL flush), inside a transaction's last round trip. */
  commitMs: number;
  /** On the bench's machine only, where they share its cores: the delay proxy per round trip, the load generator per request. */
  proxyCpuMsPerTrip?: number;
  generatorCpuMs?: number;
}

export interface Deployment {
  /** Closed model: this many clients, each sending its next request when answered. */
  clients?: number;
  /** Open model: requests per second, Poisson arrivals. */
  ratePerSecond?: number;
  processes: number;
  poolPerProcess: number;
  dbCores: number;
  /** The bench's machine: every process of the run (and nothing else of ours) on this many cores. */
  sharedCores?: number;
  rttMs: number;
}

export interface Workload {
  requests: number;
  /** Coupons the budget holds: the campaign sells out after this many issues. */
  budgetCoupons: number;
}

export interface SimResult {
  /** The run stopped early: more than `maxInSystem` requests were waiting at once. */
  overloaded: boolean;
  requestsPerSecond: number;
  issued: number;
  refused: number;
  tryAgain: number;
  p99Ms: number;
  meanLatencyMs: number;
  /** Coupons of the budget left when the first BUDGET_EXCEEDED was answered, and at the end. */
  strandedAtFirstRefusal: number;
  strandedAtEnd: number;
  /** Mean time a budget row was held per coupon issued. */
  lockHoldMs: number;
  /** Mean requests in the system (Little's law: this equals throughput times mean latency). */
  meanInSystem: number;
  wallMs: number;
}

/** The serializable transaction, as test/naive/issue-coupon.ts runs it through the runner (docs/design.md §5). */
const SERIALIZABLE = {
  /** begin, campaign, coupon, tenant, month row, budget row, insert coupon, month row, budget update, outbox, audit, commit. */
  trips: 12,
  updateTrip: 9,
  /** A sold-out campaign: the reads, the audit row, commit. */
  soldOutTrips: 8,
  maxAttempts: 8,
  backoff: { baseMs: 5, maxMs: 250 },
};

interface BudgetRow {
  lock: Resource;
  room: number;
  lastCommitAt: number;
  heldMs: number;
}

export function simulate(
  design: Design,
  costs: Costs,
  deployment: Deployment,
  workload: Workload,
  seed = 1,
  maxInSystem = Infinity,
): SimResult {
  let overloaded = false;
  const sim = new Simulation();
  const rand = random(seed);
  const shared = deployment.sharedCores ? new Resource(sim, deployment.sharedCores, 'machine') : null;
  const apps = Array.from({ length: deployment.processes }, (_, i) => shared ?? new Resource(sim, 1, `app ${i}`));
  const pools = Array.from({ length: deployment.processes }, (_, i) => new Resource(sim, deployment.poolPerProcess, `pool ${i}`));
  const db = shared ?? new Resource(sim, deployment.dbCores, 'database');
  const row = (room: number): BudgetRow => ({ lock: new Resource(sim, 1, 'row'), room, lastCommitAt: -1, heldMs: 0 });

  // The budget rows: slots split it; leases start with everything on the budget row (index 0) and a lease per process after it.
  const rows: BudgetRow[] =
    design.kind === 'slots'
      ? Array.from({ length: design.rows }, (_, i) =>
          row(Math.floor(workload.budgetCoupons / design.rows) + (i < workload.budgetCoupons % design.rows ? 1 : 0)),
        )
      : design.kind === 'leases'
        ? [row(workload.budgetCoupons), ...Array.from({ length: deployment.processes }, () => row(0))]
        : [row(workload.budgetCoupons)];
  const roomLeft = () => rows.reduce((sum, r) => sum + r.room, 0);

  const latencies: number[] = [];
  let issued = 0;
  let refused = 0;
  let tryAgain = 0;
  let strandedAtFirstRefusal: number | null = null;
  let inSystemIntegral = 0;
  let inSystem = 0;
  let lastChange = 0;
  const enter = () => {
    inSystemIntegral += inSystem * (sim.now - lastChange);
    lastChange = sim.now;
    inSystem++;
    if (inSystem > maxInSystem) {
      overloaded = true;
      sim.halt();
    }
  };
  const leave = () => {
    inSystemIntegral += inSystem * (sim.now - lastChange);
    lastChange = sim.now;
    inSystem--;
  };
  const refuse = () => {
    refused++;
    strandedAtFirstRefusal ??= roomLeft();
  };

  /** A round trip between a server process and PostgreSQL, `dbMs` of database CPU in the middle. */
  function* trip(dbMs: number): Process {
    if (shared && costs.proxyCpuMsPerTrip) yield { cpu: shared, ms: costs.proxyCpuMsPerTrip / 2 };
    yield { delay: deployment.rttMs / 2 };
    if (dbMs > 0) yield { cpu: db, ms: dbMs };
    if (shared && costs.proxyCpuMsPerTrip) yield { cpu: shared, ms: costs.proxyCpuMsPerTrip / 2 };
    yield { delay: deployment.rttMs / 2 };
  }

  /** Holds `target` for `ms`, counting the coupon it gives. */
  function* hold(target: BudgetRow, ms: number): Process {
    const start = sim.now;
    yield { delay: ms };
    target.heldMs += sim.now - start;
  }

  /** The row an issue in `process` takes, per the design (null: no room anywhere). It holds the row's lock when it returns one. */
  function* pickRow(process: number, pick: { row: BudgetRow | null }): Process {
    const withRoom = (r: BudgetRow) => r.room > 0;
    let order: BudgetRow[];
    if (design.kind === 'leases') {
      const own = rows[process + 1]!;
      order = [own, ...rows.slice(1).filter((r) => r !== own), rows[0]!];
    } else order = rows;
    const free = order.find((r) => withRoom(r) && r.lock.inUse === 0);
    if (free && free.lock.tryAcquire()) {
      pick.row = free;
      return;
    }
    const candidates = order.filter(withRoom);
    if (candidates.length === 0) return;
    // Every row with room is held: wait for the least queued (the budget row first, for leases, when it has room).
    const target = candidates.reduce((best, r) => (r.lock.queued < best.lock.queued ? r : best));
    yield { acquire: target.lock };
    // Re-checked after the wait, as the statement's CHECK does.
    if (target.room > 0) pick.row = target;
    else target.lock.release();
  }

  const refilling = new Set<number>();
  /** A lease of `process` topped up from the budget row in one statement of its own (leases.ts). */
  function* refill(process: number, leaseCoupons: number): Process {
    const pool = rows[0]!;
    yield { acquire: pools[process]! };
    yield* trip(0);
    yield { acquire: pool.lock };
    yield* hold(pool, costs.holdMs);
    const granted = Math.min(leaseCoupons, Math.ceil(pool.room / 2));
    pool.room -= granted;
    rows[process + 1]!.room += granted;
    pool.lock.release();
    pools[process]!.release();
    refilling.delete(process);
  }

  function* oneStatement(process: number): Process {
    yield* trip(0);
    if (roomLeft() === 0 || design.kind === 'not hot') {
      yield { cpu: db, ms: costs.dbCpuMs };
      if (design.kind === 'not hot') {
        issued++;
        rows[0]!.heldMs += costs.holdMs;
      } else refuse();
      return;
    }
    yield { cpu: db, ms: costs.dbCpuMs };
    const pick: { row: BudgetRow | null } = { row: null };
    // As the statement does with leases: a row that filled up while it waited is tried again while any row has room.
    for (let attempt = 1; attempt <= 4 && !pick.row && roomLeft() > 0; attempt++) yield* pickRow(process, pick);
    if (!pick.row) {
      refuse();
      return;
    }
    yield* hold(pick.row, costs.holdMs);
    pick.row.room--;
    issued++;
    pick.row.lock.release();
    if (design.kind === 'leases') {
      const own = rows[process + 1]!;
      if (own.room < Math.ceil(design.leaseCoupons / 2) && !refilling.has(process) && rows[0]!.room > 0) {
        refilling.add(process);
        sim.start(refill(process, design.leaseCoupons));
      }
    }
  }

  function* serializable(): Process {
    const budget = rows[0]!;
    const perTrip = costs.dbCpuMs / SERIALIZABLE.trips;
    for (let attempt = 1; attempt <= SERIALIZABLE.maxAttempts; attempt++) {
      const snapshotAt = sim.now;
      for (let t = 1; t < SERIALIZABLE.updateTrip; t++) yield* trip(perTrip);
      if (budget.room === 0) {
        for (let t = SERIALIZABLE.updateTrip; t <= SERIALIZABLE.soldOutTrips; t++) yield* trip(perTrip);
        refuse();
        return;
      }
      yield { acquire: budget.lock };
      if (budget.lastCommitAt > snapshotAt || budget.room === 0) {
        // 40001: another transaction committed the row after this one's snapshot. Roll back, pause, rerun.
        budget.lock.release();
        yield* trip(0);
        const ceiling = Math.min(SERIALIZABLE.backoff.maxMs, SERIALIZABLE.backoff.baseMs * 2 ** attempt);
        yield { delay: rand() * ceiling };
        continue;
      }
      const start = sim.now;
      yield* trip(perTrip);
      for (let t = SERIALIZABLE.updateTrip + 1; t < SERIALIZABLE.trips; t++) yield* trip(perTrip);
      yield { delay: costs.commitMs };
      yield* trip(perTrip);
      budget.heldMs += sim.now - start;
      budget.room--;
      budget.lastCommitAt = sim.now;
      issued++;
      budget.lock.release();
      return;
    }
    tryAgain++;
  }

  let sent = 0;
  let process = 0;
  function* request(): Process {
    const started = sim.now;
    enter();
    const mine = process++ % deployment.processes;
    if (shared && costs.generatorCpuMs) yield { cpu: shared, ms: costs.generatorCpuMs };
    yield { cpu: apps[mine]!, ms: costs.appCpuMs / 2 };
    yield { acquire: pools[mine]! };
    if (design.kind === 'serializable') yield* serializable();
    else yield* oneStatement(mine);
    pools[mine]!.release();
    yield { cpu: apps[mine]!, ms: costs.appCpuMs / 2 };
    latencies.push(sim.now - started);
    leave();
  }

  if (deployment.ratePerSecond) {
    const gapMs = 1000 / deployment.ratePerSecond;
    let at = 0;
    for (let i = 0; i < workload.requests; i++) {
      sim.at(at, () => sim.start(request()));
      at += -Math.log(1 - rand()) * gapMs;
    }
  } else {
    const lane = (): void => {
      if (sent >= workload.requests) return;
      sent++;
      sim.start(request(), lane);
    };
    for (let c = 0; c < (deployment.clients ?? 1); c++) lane();
  }
  sim.run();
  inSystemIntegral += inSystem * (sim.now - lastChange);
  const sorted = [...latencies].sort((a, b) => a - b);
  const wallMs = sim.now;
  return {
    overloaded,
    requestsPerSecond: (latencies.length / wallMs) * 1000,
    issued,
    refused,
    tryAgain,
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
    meanLatencyMs: latencies.reduce((sum, l) => sum + l, 0) / Math.max(1, latencies.length),
    strandedAtFirstRefusal: strandedAtFirstRefusal ?? roomLeft(),
    strandedAtEnd: roomLeft(),
    lockHoldMs: issued ? rows.reduce((sum, r) => sum + r.heldMs, 0) / issued : 0,
    meanInSystem: wallMs > 0 ? inSystemIntegral / wallMs : 0,
    wallMs,
  };
}
