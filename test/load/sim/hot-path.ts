import { MIN_BATCH, SIDE_BY_SIDE } from '../../../src/features/coupons/coalescer.js';
import { Cores, random, Resource, Signal, Simulation, type Process } from './engine.js';

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
 *
 * With `batchMax` above 1 (COUPON_ISSUE_BATCH_MAX), slots and not hot issue as the coalescer does
 * (src/features/coupons/coalescer.ts): per server process one line (the bench's and the model's
 * campaigns are one tenant's), an issue that finds fewer than `sideBySide` statements of its line in
 * flight runs alone at once, one that finds that many waits; when the first of them ends, up to
 * `batchMax` of those waiting go as one statement (fewer than MIN_BATCH each run alone, side by side). A batch takes one budget row for
 * all of its members that issue, as many as the row with most room pays for; the rest run alone;
 * a row that went short while the batch waited for it fails the batch whole, and its members run
 * alone. A batch pays its statement's share of the work once (`Costs.statementShare`) and each
 * member the rest.
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
  /**
   * With batching: the share of `dbCpuMs` and `holdMs` (`db`) and of `appCpuMs` (`app`) that is the
   * statement's (parse, plan, commit; sending it and reading its answer), paid once per statement
   * whatever its members; the rest is each member's. Fitted from the batched bench rows (main.ts).
   */
  statementShare?: { db: number; app: number };
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
  /** COUPON_ISSUE_BATCH_MAX: the most issues a process runs as one statement; 1 or absent, no batching. */
  batchMax?: number;
  /** Statements of a line in flight before an issue waits for a batch (the coalescer's SIDE_BY_SIDE unless given). */
  sideBySide?: number;
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
  p50Ms: number;
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
  /** Open model: when the last request arrived (0 in a closed one). */
  lastArrivalMs: number;
  /** PostgreSQL's work per request answered (meaningless in a run stopped as overloaded: work begun for requests never answered). */
  dbCpuMsPerRequest: number;
  /** Mean database cores busy over the run (the deployment's own cores, or the bench machine's shared ones). */
  dbBusyCores: number;
  /** With batching: the share of the requests batches carried and the mean issues a batch, as the server's counters count them; null when none ran. */
  batching: { share: number; membersPerBatch: number } | null;
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

  let dbWork = 0;
  /** `ms` of PostgreSQL's work, on the database's cores. */
  function* onDb(ms: number): Process {
    dbWork += Math.max(0, ms);
    yield { compute: db, ms };
  }
  /** `ms` of server process `process`'s work, on its thread. */
  function* onApp(process: number, ms: number): Process {
    yield* onThread(appThreads[process]!, appCores[process]!, ms);
  }

  /** A round trip between a server process and PostgreSQL, `dbMs` of database CPU in the middle. */
  function* trip(dbMs: number): Process {
    if (shared) yield* onThread(proxyThread, shared, (costs.proxyCpuMsPerTrip ?? 0) / 2);
    yield { delay: deployment.rttMs / 2 };
    if (dbMs > 0) yield* onDb(dbMs);
    if (shared) yield* onThread(proxyThread, shared, (costs.proxyCpuMsPerTrip ?? 0) / 2);
    yield { delay: deployment.rttMs / 2 };
  }

  /** The rest of the statement and its commit, on the database's cores, while `target` is held. */
  function* hold(target: BudgetRow, ms = costs.holdMs): Process {
    const start = sim.now;
    yield* onDb(ms);
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
    yield* onDb(costs.dbCpuMs);
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
    yield* onApp(process, costs.appCpuMsPerTrip ?? 0);
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

  const batchMax = design.kind === 'serializable' || design.kind === 'leases' ? 1 : (deployment.batchMax ?? 1);
  const share = batchMax > 1 ? (costs.statementShare ?? { db: 0, app: 0 }) : { db: 0, app: 0 };
  /** A request's own server work, each half; and its statement's, paid by whoever sends the statement, each half. */
  const requestAppMs = ((1 - share.app) * costs.appCpuMs) / 2;
  const statementAppMs = (share.app * costs.appCpuMs) / 2;

  /** One issue's statement on a connection of `process`'s pool, sent and answered. */
  function* onConnection(process: number): Process {
    yield { acquire: pools[process]! };
    yield* oneStatement(process);
    pools[process]!.release();
  }

  /** One issue's statement, its server work around it; `ownMs`, the request's own work each side, in the same turns of the thread. */
  function* alone(process: number, ownMs = 0): Process {
    yield* onApp(process, ownMs + statementAppMs);
    yield* onConnection(process);
    yield* onApp(process, statementAppMs + ownMs);
  }

  type Turn = 'lead' | 'decided' | 'alone';
  interface Member {
    signal: Signal;
    turn: Turn;
    batch: Member[];
  }
  const sideBySide = deployment.sideBySide ?? SIDE_BY_SIDE;
  const lines = Array.from({ length: deployment.processes }, () => ({ inFlight: 0, waiting: [] as Member[] }));
  const batches = { count: 0, members: 0 };

  /** A statement of `process`'s line ended: those that waited become the next batch in its place, or run alone when too few. */
  function next(process: number) {
    const line = lines[process]!;
    line.inFlight--;
    if (line.waiting.length === 0) return;
    line.inFlight++;
    const batch = line.waiting.splice(0, batchMax);
    const [leader, ...rest] = batch as [Member, ...Member[]];
    leader.turn = batch.length < MIN_BATCH ? 'alone' : 'lead';
    leader.batch = batch;
    leader.signal.fire();
    if (batch.length < MIN_BATCH) for (const member of rest) release(member, 'alone');
  }
  const release = (member: Member, turn: Turn) => {
    member.turn = turn;
    member.signal.fire();
  };

  /** How many of `members` issue in a batch of `design`, and the row they take (null: none to take). Waits for the row as the statement does. */
  function* batchBudget(process: number, members: number, pick: { row: BudgetRow | null; issuing: number; failed: boolean }): Process {
    if (design.kind === 'not hot') {
      for (let i = 0; i < members; i++) {
        const n = notHotRequests++;
        if (Math.floor((n + 1) * design.issuedShare) > Math.floor(n * design.issuedShare)) pick.issuing++;
      }
      pick.row = pick.issuing > 0 ? rows[0]! : null;
      return;
    }
    const most = rows.reduce((m, r) => Math.max(m, r.room), 0);
    if (most === 0) return;
    pick.issuing = Math.min(members, most);
    const taken: { row: BudgetRow | null } = { row: null };
    yield* pickRow(process, taken);
    if (taken.row && taken.row.room < pick.issuing) {
      // The row went short while the batch waited for it: 40001, the batch kept nothing.
      taken.row.lock.release();
      pick.failed = true;
      return;
    }
    pick.row = taken.row;
    if (!taken.row) pick.failed = true;
  }

  /** The leader's batch as one statement: the statement's share once, each member's share, the row once for those that issue. */
  function* runBatch(process: number, batch: Member[]): Process {
    batches.count++;
    batches.members += batch.length;
    yield* onApp(process, statementAppMs);
    yield { acquire: pools[process]! };
    yield* trip(0);
    yield* onDb(costs.dbCpuMs * (share.db + batch.length * (1 - share.db)));
    const pick = { row: null as BudgetRow | null, issuing: 0, failed: false };
    yield* batchBudget(process, batch.length, pick);
    if (pick.row) {
      yield* hold(pick.row, costs.holdMs * (share.db + pick.issuing * (1 - share.db)));
      if (design.kind !== 'not hot') {
        pick.row.room -= pick.issuing;
        pick.row.lock.release();
      }
      issued += pick.issuing;
    }
    pools[process]!.release();
    next(process);
    yield* onApp(process, statementAppMs);
    if (pick.failed) {
      for (const member of batch.slice(1)) release(member, 'alone');
      yield* alone(process);
      return;
    }
    // Not hot, every member is decided; with no room anywhere every member is refused; else those the row paid for are
    // decided and the rest run alone (the leader, at the head, is always among the decided).
    let decided = batch.length;
    if (design.kind === 'not hot') refused += batch.length - pick.issuing;
    else if (!pick.row) batch.forEach(() => refuse());
    else decided = pick.issuing;
    batch.slice(1).forEach((member, i) => release(member, i + 1 < decided ? 'decided' : 'alone'));
  }

  /**
   * An issue through `process`'s coalescer, with its own server work: the first half, then, in the
   * same turn of the thread, the line's decision, so that an issue that runs at once is served
   * exactly as without batching.
   */
  function* coalesced(process: number): Process {
    const line = lines[process]!;
    const thread = appThreads[process]!;
    yield { acquire: thread };
    if (requestAppMs > 0) yield { compute: appCores[process]!, ms: requestAppMs };
    if (line.inFlight < sideBySide) {
      line.inFlight++;
      if (statementAppMs > 0) yield { compute: appCores[process]!, ms: statementAppMs };
      thread.release();
      yield* onConnection(process);
      yield* answered(process, () => next(process));
      return;
    }
    thread.release();
    const member: Member = { signal: new Signal(sim), turn: 'alone', batch: [] };
    line.waiting.push(member);
    yield { until: member.signal };
    if (member.turn === 'lead') {
      yield* runBatch(process, member.batch);
      yield* onApp(process, requestAppMs);
    } else if (member.turn === 'alone') {
      // A leader of too few runs alone and holds the line while its statement is in flight.
      yield* onApp(process, statementAppMs);
      yield* onConnection(process);
      yield* answered(process, () => member.batch.length > 0 && next(process));
    } else yield* onApp(process, requestAppMs);
  }

  /**
   * The server reads a statement's answer (its share of the work), and in the same turn of its
   * thread tells the line (`ended`, as the coalescer does once the answer is read) and does the
   * request's own second half.
   */
  function* answered(process: number, ended: () => void): Process {
    const thread = appThreads[process]!;
    yield { acquire: thread };
    if (statementAppMs > 0) yield { compute: appCores[process]!, ms: statementAppMs };
    ended();
    if (requestAppMs > 0) yield { compute: appCores[process]!, ms: requestAppMs };
    thread.release();
  }

  let sent = 0;
  let process = 0;
  function* request(): Process {
    const started = sim.now;
    enter();
    const mine = process++ % deployment.processes;
    if (shared) yield* onThread(generatorThread, shared, costs.generatorCpuMs ?? 0);
    if (design.kind === 'serializable') {
      yield* onApp(mine, requestAppMs);
      yield* serializable(mine);
      yield* onApp(mine, requestAppMs);
    } else if (batchMax > 1) yield* coalesced(mine);
    else yield* alone(mine, requestAppMs);
    latencies.push(sim.now - started);
    leave();
  }

  let lastArrivalMs = 0;
  if (deployment.ratePerSecond) {
    const gapMs = 1000 / deployment.ratePerSecond;
    let at = 0;
    for (let i = 0; i < workload.requests; i++) {
      sim.at(at, () => sim.start(request()));
      lastArrivalMs = at;
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
    p50Ms: sorted[Math.floor(sorted.length * 0.5)] ?? 0,
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
    meanLatencyMs: latencies.reduce((sum, l) => sum + l, 0) / Math.max(1, latencies.length),
    strandedAtFirstRefusal: strandedAtFirstRefusal ?? roomLeft(),
    strandedAtEnd: roomLeft(),
    lockHoldMs: issued ? rows.reduce((sum, r) => sum + r.heldMs, 0) / issued : 0,
    meanInSystem: wallMs > 0 ? inSystemIntegral / wallMs : 0,
    wallMs,
    lastArrivalMs,
    dbCpuMsPerRequest: dbWork / Math.max(1, latencies.length),
    dbBusyCores: db.utilisation(),
    batching:
      batches.count > 0
        ? { share: batches.members / Math.max(1, latencies.length), membersPerBatch: batches.members / batches.count }
        : null,
  };
}
