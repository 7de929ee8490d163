import { Cores, random, Resource, Simulation, type Process } from './engine.js';

/**
 * The hot path of issueCoupon as a queueing model: clients, server processes (one thread each, on
 * a core of its own or on the machine's shared cores), their connection pools, the network round
 * trip, PostgreSQL's cores (shared by processor sharing among the statements running), and the
 * budget rows whose locks every issue queues on. The statement that holds a budget row does the
 * rest of its work and its commit (`holdMs` of work) on those shared cores, so it holds the row the
 * longer the more else runs. The designs:
 *
 * - `slots`: one statement (docs/design.md §4); an issue takes a free budget row with room (SKIP
 *   LOCKED), else waits for one with room; the row is held for the rest of the statement and its
 *   commit, never across a round trip.
 * - `leases`: one statement; a lease row per process, topped up from the budget row when it runs
 *   below half; an issue takes its own lease, else any free lease, else the budget row, else waits.
 * - `serializable`: the read-check-write transaction at SERIALIZABLE, one round trip per statement;
 *   an update of the budget row that another transaction committed after this one's snapshot fails
 *   (40001), and the whole transaction is retried after a full-jitter pause, at most 8 attempts.
 * - `not hot`: one statement, and the budget rows never contended (the reference campaigns).
 */
export type Design =
  | { kind: 'slots'; rows: number }
  | { kind: 'leases'; leaseCoupons: number }
  | { kind: 'serializable' }
  /** Budget rows nobody contends for; this share of the requests issues, the rest are refused from the snapshot. */
  | { kind: 'not hot'; issuedShare: number };

/** What one request costs, in ms. */
export interface Costs {
  /** CPU of the server process per request, half as it comes in and half as it is answered. */
  appCpuMs: number;
  /** A transaction's server CPU after each of its round trips (reading the answer, sending the next statement), besides `appCpuMs`. */
  appCpuMsPerTrip?: number;
  /** CPU of PostgreSQL per request besides `holdMs` (all of a refusal); the serializable transaction spends it over its statements. */
  dbCpuMs: number;
  /** Work on the database's cores while an issue holds its budget row (the rest of the statement and its commit): the hold when a core is free. */
  holdMs: number;
  /** The commit's own work on the database's cores, inside a transaction's last round trip. */
  commitMs: number;
  /** On the bench's machine only, where they share its cores: the delay proxy per round trip, the load generator per request (one thread each). */
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
  /** The bench's machine: every process of the run (server, PostgreSQL, delay proxy, load generator) shares this many cores (fractional: what other users left). */
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
  const shared = deployment.sharedCores ? new Cores(sim, deployment.sharedCores, 'machine') : null;
  // A Node process runs one callback at a time: its thread is a queue in front of whatever cores it runs on.
  const appThreads = Array.from({ length: deployment.processes }, (_, i) => new Resource(sim, 1, `app ${i}`));
  const appCores = Array.from({ length: deployment.processes }, (_, i) => shared ?? new Cores(sim, 1, `core ${i}`));
  const proxyThread = new Resource(sim, 1, 'delay proxy');
  const generatorThread = new Resource(sim, 1, 'load generator');
  const pools = Array.from({ length: deployment.processes }, (_, i) => new Resource(sim, deployment.poolPerProcess, `pool ${i}`));
  // Each backend is a process of its own: the statements running share the database's cores.
  const db = shared ?? new Cores(sim, deployment.dbCores, 'database');
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

  /** `ms` of work of a single-threaded process: its turn on its thread, then the cores. */
  function* onThread(thread: Resource, cores: Cores, ms: number): Process {
    if (!(ms > 0)) return;
    yield { acquire: thread };
    yield { compute: cores, ms };
    thread.release();
  }

  /** A round trip between a server process and PostgreSQL, `dbMs` of database CPU in the middle. */
  function* trip(dbMs: number): Process {
    if (shared) yield* onThread(proxyThread, shared, (costs.proxyCpuMsPerTrip ?? 0) / 2);
    yield { delay: deployment.rttMs / 2 };
    if (dbMs > 0) yield { compute: db, ms: dbMs };
    if (shared) yield* onThread(proxyThread, shared, (costs.proxyCpuMsPerTrip ?? 0) / 2);
    yield { delay: deployment.rttMs / 2 };
  }

  /** The rest of the statement and its commit, on the database's cores, while `target` is held. */
  function* hold(target: BudgetRow): Process {
    const start = sim.now;
    yield { compute: db, ms: costs.holdMs };
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
    yield* hold(pool);
    const granted = Math.min(leaseCoupons, Math.ceil(pool.room / 2));
    pool.room -= granted;
    rows[process + 1]!.room += granted;
    pool.lock.release();
    pools[process]!.release();
    refilling.delete(process);
  }

  let notHotRequests = 0;
  function* oneStatement(process: number): Process {
    yield* trip(0);
    yield { compute: db, ms: costs.dbCpuMs };
    if (design.kind === 'not hot') {
      // Every 1 / issuedShare-th request issues, on a row nobody else waits for.
      const n = notHotRequests++;
      if (Math.floor((n + 1) * design.issuedShare) > Math.floor(n * design.issuedShare)) {
        yield* hold(rows[0]!);
        issued++;
      } else refused++;
      return;
    }
    if (roomLeft() === 0) {
      refuse();
      return;
    }
    const pick: { row: BudgetRow | null } = { row: null };
    // As the statement does with leases: a row that filled up while it waited is tried again while any row has room.
    for (let attempt = 1; attempt <= 4 && !pick.row && roomLeft() > 0; attempt++) yield* pickRow(process, pick);
    if (!pick.row) {
      refuse();
      return;
    }
    yield* hold(pick.row);
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

  /** A statement of the transaction: its round trip, then the server's work on the answer and the next statement. */
  function* statement(process: number, dbMs: number): Process {
    yield* trip(dbMs);
    yield* onThread(appThreads[process]!, appCores[process]!, costs.appCpuMsPerTrip ?? 0);
  }

  function* serializable(process: number): Process {
    const budget = rows[0]!;
    const perTrip = costs.dbCpuMs / SERIALIZABLE.trips;
    const pool = pools[process]!;
    // Each attempt is a transaction on a connection of its own: the pause between attempts holds none.
    for (let attempt = 1; attempt <= SERIALIZABLE.maxAttempts; attempt++) {
      yield { acquire: pool };
      const snapshotAt = sim.now;
      for (let t = 1; t < SERIALIZABLE.updateTrip; t++) yield* statement(process, perTrip);
      if (budget.room === 0) {
        for (let t = SERIALIZABLE.updateTrip; t <= SERIALIZABLE.soldOutTrips; t++) yield* statement(process, perTrip);
        pool.release();
        refuse();
        return;
      }
      yield { acquire: budget.lock };
      if (budget.lastCommitAt > snapshotAt || budget.room === 0) {
        // 40001: another transaction committed the row after this one's snapshot. Roll back, pause, rerun.
        budget.lock.release();
        yield* statement(process, 0);
        pool.release();
        const ceiling = Math.min(SERIALIZABLE.backoff.maxMs, SERIALIZABLE.backoff.baseMs * 2 ** attempt);
        yield { delay: rand() * ceiling };
        continue;
      }
      const start = sim.now;
      yield* statement(process, perTrip);
      for (let t = SERIALIZABLE.updateTrip + 1; t < SERIALIZABLE.trips; t++) yield* statement(process, perTrip);
      yield* statement(process, perTrip + costs.commitMs);
      budget.heldMs += sim.now - start;
      budget.room--;
      budget.lastCommitAt = sim.now;
      issued++;
      budget.lock.release();
      pool.release();
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
    if (shared) yield* onThread(generatorThread, shared, costs.generatorCpuMs ?? 0);
    yield* onThread(appThreads[mine]!, appCores[mine]!, costs.appCpuMs / 2);
    if (design.kind === 'serializable') yield* serializable(mine);
    else {
      yield { acquire: pools[mine]! };
      yield* oneStatement(mine);
      pools[mine]!.release();
    }
    yield* onThread(appThreads[mine]!, appCores[mine]!, costs.appCpuMs / 2);
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
