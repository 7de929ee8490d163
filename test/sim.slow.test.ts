import { describe, expect, it } from 'vitest';
import { Cores, Simulation } from './load/sim/engine.js';
import { simulate, type Costs } from './load/sim/hot-path.js';
import { statementShareOf } from './load/sim/main.js';
import { MIN_BATCH, SIDE_BY_SIDE } from '../src/features/coupons/coalescer.js';
import type { CalibratedRow } from './load/sim/calibration.js';

// The simulation behind npm run sim against what queueing theory says of its simplest cases, so
// that a broken engine or model fails here rather than answering the capacity question wrongly.

const free: Costs = { appCpuMs: 0, dbCpuMs: 0, holdMs: 0, commitMs: 0 };
const roomy = { processes: 1, poolPerProcess: 10_000, dbCores: 10_000 };

describe('the hot-path simulation', () => {
  it('one client, nothing shared: each request takes exactly its CPU, round trip and hold', () => {
    const costs = { ...free, appCpuMs: 0.4, dbCpuMs: 0.2, holdMs: 0.3 };
    const result = simulate(
      { kind: 'slots', rows: 1 },
      costs,
      { ...roomy, clients: 1, rttMs: 1 },
      { requests: 1_000, budgetCoupons: 2_000 },
    );
    expect(result.meanLatencyMs).toBeCloseTo(0.4 + 1 + 0.2 + 0.3, 6);
    expect(result.requestsPerSecond).toBeCloseTo(1000 / 1.9, 3);
    expect(result.lockHoldMs).toBeCloseTo(0.3, 6);
  });

  it('many clients on one budget row: the row is the bottleneck, 1 / hold', () => {
    const result = simulate(
      { kind: 'slots', rows: 1 },
      { ...free, holdMs: 0.5 },
      { ...roomy, clients: 64, rttMs: 0.1 },
      { requests: 20_000, budgetCoupons: 20_000 },
    );
    expect(result.requestsPerSecond / 2_000).toBeGreaterThan(0.99);
    expect(result.requestsPerSecond / 2_000).toBeLessThan(1.001);
    // Spread over 4 rows with SKIP LOCKED, four times as much.
    const four = simulate(
      { kind: 'slots', rows: 4 },
      { ...free, holdMs: 0.5 },
      { ...roomy, clients: 64, rttMs: 0.1 },
      { requests: 20_000, budgetCoupons: 20_000 },
    );
    expect(four.requestsPerSecond / 8_000).toBeGreaterThan(0.97);
  });

  it("Little's law holds on its own output: clients in the system = throughput x latency", () => {
    const result = simulate(
      { kind: 'slots', rows: 2 },
      { ...free, appCpuMs: 0.3, dbCpuMs: 0.2, holdMs: 0.4 },
      { clients: 40, processes: 2, poolPerProcess: 10, dbCores: 2, rttMs: 1 },
      { requests: 20_000, budgetCoupons: 10_000 },
    );
    expect(result.meanInSystem).toBeCloseTo(40, 0);
    expect((result.requestsPerSecond * result.meanLatencyMs) / 1000 / result.meanInSystem).toBeCloseTo(1, 2);
  });

  it('Poisson arrivals at one budget row with a fixed hold: the M/D/1 queue, W = h + rho h / (2 (1 - rho))', () => {
    const holdMs = 1;
    for (const rho of [0.5, 0.8]) {
      const result = simulate(
        { kind: 'slots', rows: 1 },
        { ...free, holdMs },
        { ...roomy, ratePerSecond: rho * 1000, rttMs: 0 },
        { requests: 80_000, budgetCoupons: 80_000 },
        7,
      );
      const expected = holdMs + (rho * holdMs) / (2 * (1 - rho));
      expect(result.meanLatencyMs / expected).toBeGreaterThan(0.95);
      expect(result.meanLatencyMs / expected).toBeLessThan(1.05);
    }
  });

  it('sells out exactly: never more coupons than the budget, and refuses the rest', () => {
    for (const design of [
      { kind: 'slots', rows: 16 } as const,
      { kind: 'leases', leaseCoupons: 50 } as const,
      { kind: 'serializable' } as const,
    ]) {
      const result = simulate(
        design,
        { ...free, appCpuMs: 0.2, dbCpuMs: 0.1, holdMs: 0.2, commitMs: 0.2 },
        { ...roomy, clients: 32, rttMs: 1 },
        { requests: 2_000, budgetCoupons: 1_000 },
      );
      expect(result.issued + result.refused + result.tryAgain).toBe(2_000);
      expect(result.issued).toBeLessThanOrEqual(1_000);
      if (design.kind !== 'serializable') expect(result.issued).toBe(1_000);
      expect(result.strandedAtEnd).toBe(1_000 - result.issued);
    }
  });

  it('SERIALIZABLE with one client never conflicts: twelve round trips and a commit per issue', () => {
    const result = simulate(
      { kind: 'serializable' },
      { ...free, commitMs: 0.5 },
      { ...roomy, clients: 1, rttMs: 1 },
      { requests: 100, budgetCoupons: 100 },
    );
    expect(result.tryAgain).toBe(0);
    expect(result.meanLatencyMs).toBeCloseTo(12 + 0.5, 6);
  });
});

describe('the coalescer in the model (COUPON_ISSUE_BATCH_MAX)', () => {
  it('never makes a lone request wait: one client takes exactly as long batched as not', () => {
    const costs = { ...free, appCpuMs: 0.4, dbCpuMs: 0.2, holdMs: 0.3, statementShare: { db: 0.7, app: 0.3 } };
    const run = (batchMax: number) =>
      simulate({ kind: 'slots', rows: 1 }, costs, { ...roomy, clients: 1, rttMs: 1, batchMax }, { requests: 500, budgetCoupons: 1_000 });
    expect(run(32).meanLatencyMs).toBeCloseTo(run(1).meanLatencyMs, 9);
    expect(run(32).batching).toBeNull();
  });

  it('up to sideBySide clients never wait batched: their latency is exactly the unbatched one; one statement at a time made them wait', () => {
    // No server CPU: the process's one thread would order the clients' work differently batched and not.
    const costs = { ...free, dbCpuMs: 0.2, holdMs: 0.3, statementShare: { db: 0.7, app: 0 } };
    const sideBySide = 2;
    const run = (batchMax: number, lineStatements = sideBySide) =>
      simulate(
        { kind: 'not hot', issuedShare: 1 },
        costs,
        { ...roomy, clients: sideBySide, rttMs: 1, batchMax, sideBySide: lineStatements },
        { requests: 2_000, budgetCoupons: 2_000 },
      );
    expect(run(32).meanLatencyMs).toBeCloseTo(run(1).meanLatencyMs, 9);
    expect(run(32).batching).toBeNull();
    // One statement of the line at a time: the others waited for it, each to run alone after it.
    expect(run(32, 1).meanLatencyMs).toBeGreaterThan(1.5 * run(1).meanLatencyMs);
  });

  it('a batch holds the row once: with all of the hold the statement’s, one row serves a batch per hold', () => {
    const costs = { ...free, holdMs: 1, statementShare: { db: 1, app: 0 } };
    // One statement in flight at a time, so that each batch is all that waited.
    const run = (batchMax: number) =>
      simulate(
        { kind: 'slots', rows: 1 },
        costs,
        { ...roomy, clients: 64, rttMs: 0, batchMax, sideBySide: 1 },
        { requests: 32_000, budgetCoupons: 32_000 },
      );
    const unbatched = run(1);
    expect(unbatched.requestsPerSecond / 1_000).toBeGreaterThan(0.99);
    expect(unbatched.requestsPerSecond / 1_000).toBeLessThan(1.001);
    // 64 clients, one statement in flight: 32 wait each time one ends, and go as one.
    const batched = run(32);
    expect(batched.requestsPerSecond / 32_000).toBeGreaterThan(0.95);
    expect(batched.requestsPerSecond / 32_000).toBeLessThan(1.001);
    expect(batched.batching!.membersPerBatch).toBeCloseTo(32, 0);
    // The statement's share paid once a batch: PostgreSQL's work per request is the hold over the batch.
    expect(batched.dbCpuMsPerRequest).toBeCloseTo(1 / 32, 2);
  });

  it('fewer than MIN_BATCH waiting run alone, and a batch never carries more than batchMax', () => {
    const costs = { ...free, appCpuMs: 0.2, dbCpuMs: 0.2, holdMs: 0.3, statementShare: { db: 0.7, app: 0.3 } };
    const three = simulate(
      { kind: 'slots', rows: 1 },
      costs,
      { ...roomy, clients: SIDE_BY_SIDE + MIN_BATCH - 1, rttMs: 1, batchMax: 32 },
      { requests: 2_000, budgetCoupons: 2_000 },
    );
    // At most MIN_BATCH - 1 wait behind the SIDE_BY_SIDE in flight: too few for a batch.
    expect(three.batching).toBeNull();
    const many = simulate(
      { kind: 'slots', rows: 1 },
      costs,
      { ...roomy, clients: 200, rttMs: 1, batchMax: 8 },
      { requests: 8_000, budgetCoupons: 8_000 },
    );
    expect(many.batching!.membersPerBatch).toBeLessThanOrEqual(8);
    expect(many.batching!.membersPerBatch).toBeGreaterThan(7);
  });

  it('sells out exactly batched: the row with most room pays for what it can, the rest run alone', () => {
    for (const rows of [1, 16]) {
      const result = simulate(
        { kind: 'slots', rows },
        { ...free, appCpuMs: 0.2, dbCpuMs: 0.1, holdMs: 0.2, statementShare: { db: 0.7, app: 0.3 } },
        { ...roomy, clients: 64, rttMs: 1, batchMax: 32 },
        { requests: 3_000, budgetCoupons: 1_003 },
      );
      expect(result.batching).not.toBeNull();
      expect(result.issued).toBe(1_003);
      expect(result.issued + result.refused).toBe(3_000);
      expect(result.strandedAtEnd).toBe(0);
    }
  });

  it("fits the statement's share from a batched row and its unbatched one: batched / unbatched = 1 - s + s x statements per request", () => {
    const row = (cpu: Record<string, number>, batching: CalibratedRow['batching']): CalibratedRow => ({
      label: 'row',
      requestsPerSecond: 1,
      p99Ms: 1,
      lockHoldMs: null,
      retriesPerRequest: 0,
      strandedAtFirstRefusalYen: null,
      cpuMsPerRequest: cpu,
      machineBusyCores: 1,
      batching,
    });
    // 90 % of the requests in batches of 10: 0.1 + 0.09 = 0.19 statements a request.
    const statements = 0.1 + 0.9 / 10;
    const batched = row(
      { PostgreSQL: 1 - 0.8 + 0.8 * statements, server: 2 * (1 - 0.3 + 0.3 * statements) },
      { share: 0.9, membersPerBatch: 10 },
    );
    const share = statementShareOf(batched, row({ PostgreSQL: 1, server: 2 }, null));
    expect(share.db).toBeCloseTo(0.8, 9);
    expect(share.app).toBeCloseTo(0.3, 9);
  });
});

describe('processor sharing (the cores every process and statement share)', () => {
  /** When each of `jobs` (ms of work each, all submitted at 0) finishes on `cores`. */
  function finishTimes(cores: number, jobs: number[]): number[] {
    const sim = new Simulation();
    const shared = new Cores(sim, cores);
    const done: number[] = [];
    jobs.forEach((ms, i) => shared.submit(ms, () => (done[i] = sim.now)));
    sim.run();
    return done;
  }

  it('N equal jobs of s ms on C cores all finish at N s / C, and at s when they are fewer than the cores', () => {
    for (const [n, cores] of [
      [8, 2],
      [5, 1],
      [7, 1.5],
    ] as const) {
      for (const at of finishTimes(
        cores,
        Array.from({ length: n }, () => 3),
      ))
        expect(at).toBeCloseTo((n * 3) / cores, 9);
    }
    for (const at of finishTimes(4, [3, 3])) expect(at).toBeCloseTo(3, 9);
  });

  it('a short and a long job on one core: the short ends at twice its work, the long at the sum of both', () => {
    const [short, long] = finishTimes(1, [1, 5]);
    expect(short).toBeCloseTo(2, 9);
    expect(long).toBeCloseTo(6, 9);
  });

  it('a job that arrives later shares from then on', () => {
    const sim = new Simulation();
    const core = new Cores(sim, 1);
    const done: Record<string, number> = {};
    core.submit(4, () => (done['first'] = sim.now));
    sim.at(2, () => core.submit(1, () => (done['second'] = sim.now)));
    sim.run();
    // From 2 on both run at half speed: the second's 1 ms ends at 4, the first's last 1 ms at 5.
    expect(done['second']).toBeCloseTo(4, 9);
    expect(done['first']).toBeCloseTo(5, 9);
    expect(core.utilisation()).toBeCloseTo(1, 9);
  });

  it('a budget row holder waits for the cores too: on half a core one client holds the row twice the hold', () => {
    const result = simulate(
      { kind: 'slots', rows: 1 },
      { ...free, holdMs: 0.5 },
      { clients: 1, processes: 1, poolPerProcess: 10, dbCores: 1, sharedCores: 0.5, rttMs: 1 },
      { requests: 200, budgetCoupons: 200 },
    );
    expect(result.lockHoldMs).toBeCloseTo(1, 6);
    expect(result.meanLatencyMs).toBeCloseTo(1 + 1, 6);
  });

  it('everything on shared cores: the machine is the bottleneck at cores / CPU per request', () => {
    const costs = { ...free, appCpuMs: 0.4, dbCpuMs: 0.5, holdMs: 0.2, proxyCpuMsPerTrip: 0.3, generatorCpuMs: 0.4 };
    const result = simulate(
      { kind: 'slots', rows: 16 },
      costs,
      { clients: 64, processes: 1, poolPerProcess: 10, dbCores: 1, sharedCores: 1.5, rttMs: 1 },
      { requests: 8_000, budgetCoupons: 8_000 },
    );
    const ceiling = (1.5 / (0.4 + 0.5 + 0.2 + 0.3 + 0.4)) * 1000;
    expect(result.requestsPerSecond / ceiling).toBeGreaterThan(0.97);
    expect(result.requestsPerSecond / ceiling).toBeLessThan(1.001);
  });

  it('a server process is one thread: however many cores are free, it answers at most 1 / its CPU per request', () => {
    const result = simulate(
      { kind: 'slots', rows: 16 },
      { ...free, appCpuMs: 1 },
      { clients: 64, processes: 1, poolPerProcess: 10, dbCores: 8, sharedCores: 8, rttMs: 1 },
      { requests: 8_000, budgetCoupons: 8_000 },
    );
    expect(result.requestsPerSecond / 1000).toBeGreaterThan(0.97);
    expect(result.requestsPerSecond / 1000).toBeLessThan(1.001);
  });
});
