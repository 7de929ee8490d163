import { referenceScenario } from '../scenarios/coupons.js';
import { readCalibration, type CalibratedRow, type Calibration } from './calibration.js';
import { simulate, type Costs, type Design, type Deployment, type SimResult } from './hot-path.js';
import { openingSecond, type OpeningCandidate } from './opening.js';
import { SIDE_BY_SIDE } from '../../../src/features/coupons/coalescer.js';

const USAGE = `usage: npm run sim [-- --calibration FILE] [--rate 10000] [--requests 20000] [--hold-ms MS]

Replays the bench's hot rows (1 ms round trip, 128 clients, sold out half-way) with the costs the
bench measured on its machine (test/load/sim/calibration.json, written by npm run bench), prints
measured and simulated side by side, then answers: how many server processes, budget rows or
leases and database cores issue --rate coupons per second at 1 ms and at 5 ms round trip, with what
p99 and stranded budget, for budget slots, budget leases and SERIALIZABLE, and for slots with issues
batched (COUPON_ISSUE_BATCH_MAX, fitted on the bench's batched rows), then what batching adds to
latency at low load, and how long the queue the opening instant makes takes to drain when
--rate members arrive in the campaign's first second. --hold-ms replaces the measured one-client hold: what if a budget row
were held that long (a database with cores of its own, where this machine's are all busy).`;

/** The server's pool (DB_POOL_MAX's default). */
const POOL_PER_PROCESS = 10;
/** A configuration keeps up when it answers this share of the offered rate, with p99 under P99_LIMIT_MS. */
const KEEPS_UP = 0.98;
const P99_LIMIT_MS = 100;

function parseArgs(argv: string[]) {
  let calibration: string | undefined;
  let rate = 10_000;
  let requests = 20_000;
  let holdMs: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--calibration') calibration = argv[++i];
    else if (argv[i] === '--rate') rate = Number(argv[++i]);
    else if (argv[i] === '--requests') requests = Number(argv[++i]);
    else if (argv[i] === '--hold-ms') holdMs = Number(argv[++i]);
    else {
      console.log(USAGE);
      process.exit(argv[i] === '--help' ? 0 : 2);
    }
  }
  if (!(rate > 0) || !(requests >= 1000) || (holdMs !== null && !(holdMs > 0))) {
    console.error(USAGE);
    process.exit(2);
  }
  return { calibration, rate, requests, holdMs };
}

/** What a bench row's label says of its server: its issues batched (COUPON_ISSUE_BATCH_MAX above 1). */
const BATCHED = ', batched';
export const isBatched = (label: string) => label.includes(BATCHED);

/** The design a bench row measured (a batched row's is its unbatched row's). */
export function designOf(label: string, calibration: Calibration): Design | null {
  if (isBatched(label)) return designOf(label.replace(BATCHED, ''), calibration);
  if (label.startsWith('hot campaign, 1 budget slot')) return { kind: 'slots', rows: 1 };
  if (label.startsWith('hot campaign, 16 budget slots')) return { kind: 'slots', rows: calibration.hot.slots };
  if (label.startsWith('hot campaign, budget leases')) return { kind: 'leases', leaseCoupons: calibration.hot.leaseCoupons };
  if (label.startsWith('hot campaign, SERIALIZABLE')) return { kind: 'serializable' };
  if (label.startsWith('not hot')) return { kind: 'not hot', issuedShare: referenceIssuedShare() };
  return null;
}

/** The share of the reference scenario's requests that issue a coupon (the rest: already issued, or the month's cap). */
function referenceIssuedShare(): number {
  const scenario = referenceScenario('share');
  if (scenario.expectedIssued === null) throw new Error('the reference scenario no longer says how many coupons it issues');
  return scenario.expectedIssued / (scenario.members.length * scenario.campaigns.length * scenario.sends);
}

/** The share of a design's requests that issue: the hot campaign sells out half-way. */
const issuedShareOf = (design: Design) => (design.kind === 'not hot' ? design.issuedShare : 0.5);

/** Round trips of the serializable transaction (hot-path.ts): one that issues, one that finds the campaign sold out, and one attempt lost to 40001. */
const SERIALIZABLE_TRIPS = { issued: 12, soldOut: 8, conflict: 9 };

/** Further requests waiting than this and a configuration is behind for good: the run stops there. */
const HOPELESS = 3_000;

/**
 * A bench row as the machine ran it: every process of ours on the cores the machine's other users
 * left (its busy cores less ours, as measured during the row), each with the CPU per request it was
 * measured to use. The budget row's hold is not an input: the statement holding it does the work of
 * the one-client hold (`quietHoldMs`, taken as CPU) on those shared cores, and waits for them as
 * everything else does; that work is part of PostgreSQL's CPU per issued request.
 */
export function benchSetting(row: CalibratedRow, design: Design, calibration: Calibration): { costs: Costs; deployment: Deployment } {
  const ours = Object.values(row.cpuMsPerRequest).reduce((sum, ms) => sum + ms, 0);
  const ourCores = (ours * row.requestsPerSecond) / 1000;
  const others = Math.max(0, row.machineBusyCores - ourCores);
  // A batched row runs its unbatched row's work, its statements' share paid once a batch (fitted from the two rows).
  const unbatched = isBatched(row.label) ? partnerOf(row, calibration) : row;
  const costs = unbatchedCosts(unbatched, design, calibration);
  return {
    costs: isBatched(row.label) ? { ...costs, statementShare: statementShareOf(row, unbatched) } : costs,
    deployment: {
      clients: calibration.hot.clients,
      processes: 1,
      poolPerProcess: POOL_PER_PROCESS,
      dbCores: calibration.cores,
      sharedCores: Math.max(0.25, calibration.cores - others),
      rttMs: calibration.proxyRttMs,
      ...(isBatched(row.label) ? { batchMax: calibration.batchMax ?? DEFAULT_BATCH_MAX } : {}),
    },
  };
}

/** The bench's COUPON_ISSUE_BATCH_MAX, for a calibration that does not name it. */
const DEFAULT_BATCH_MAX = 32;

/** The unbatched row a batched row was measured beside. */
function partnerOf(row: CalibratedRow, calibration: Calibration): CalibratedRow {
  const label = row.label.replace(BATCHED, '');
  const partner = calibration.rows.find((r) => r.label === label);
  if (!partner) throw new Error(`the calibration has "${row.label}" but not the unbatched row "${label}" it is fitted against`);
  return partner;
}

/**
 * The share of a statement's work paid once per statement, from a batched row and its unbatched
 * one: the batched row ran `statements` per request (its server's counters), and a share s of each
 * request's CPU is the statement's, so batched / unbatched = 1 - s + s * statements, for
 * PostgreSQL's CPU and for the server's.
 */
export function statementShareOf(batched: CalibratedRow, unbatched: CalibratedRow): { db: number; app: number } {
  const batching = batched.batching;
  if (!batching) throw new Error(`"${batched.label}" has no batch counts: measure it again with npm run bench`);
  const statementsPerRequest = 1 - batching.share + batching.share / batching.membersPerBatch;
  const fit = (part: string) => {
    const ratio = (batched.cpuMsPerRequest[part] ?? 0) / (unbatched.cpuMsPerRequest[part] ?? 1);
    return Math.min(1, Math.max(0, (1 - ratio) / (1 - statementsPerRequest)));
  };
  return { db: fit('PostgreSQL'), app: fit('server') };
}

/** One issue a statement: the costs of a row as measured. */
function unbatchedCosts(row: CalibratedRow, design: Design, calibration: Calibration): Costs {
  const cpu = row.cpuMsPerRequest;
  const issuedShare = issuedShareOf(design);
  const trips =
    design.kind === 'serializable'
      ? issuedShare * SERIALIZABLE_TRIPS.issued +
        (1 - issuedShare) * SERIALIZABLE_TRIPS.soldOut +
        row.retriesPerRequest * SERIALIZABLE_TRIPS.conflict
      : 1;
  const holdMs = calibration.quietHoldMs;
  const outsideHold = Math.max(0, (cpu['PostgreSQL'] ?? 0) - issuedShare * holdMs);
  return {
    // A transaction's server CPU goes to its round trips and to the request itself in equal parts; one statement has it all around its trip.
    appCpuMs: (cpu['server'] ?? 0) / (design.kind === 'serializable' ? trips + 1 : 1),
    appCpuMsPerTrip: design.kind === 'serializable' ? (cpu['server'] ?? 0) / (trips + 1) : 0,
    // The serializable transaction's dbCpuMs is that of one attempt that commits, spread over its statements.
    dbCpuMs: design.kind === 'serializable' ? (outsideHold / trips) * SERIALIZABLE_TRIPS.issued : outsideHold,
    holdMs,
    commitMs: holdMs,
    proxyCpuMsPerTrip: (cpu['delay proxy'] ?? 0) / trips,
    generatorCpuMs: cpu['load generator'] ?? 0,
  };
}

const pct = (sim: number, measured: number) => `${(((sim - measured) / measured) * 100).toFixed(0)} %`;

function replayBench(calibration: Calibration): number[] {
  console.log(
    `Calibration: ${calibration.machine}, commit ${calibration.commit}, measured ${calibration.measured}; ` +
      `round trip through the proxy ${calibration.proxyRttMs} ms nominal (select 1: ${calibration.rttMs.toFixed(2)} ms, ${calibration.directRttMs.toFixed(2)} ms direct)\n`,
  );
  console.log(
    '| bench row (128 clients, 1 ms) | req/s measured | req/s simulated | error | p99 ms measured | p99 ms simulated | ' +
      'lock hold ms measured | lock hold ms simulated | PostgreSQL CPU ms/req measured | simulated | issues per batch (share batched) measured | simulated |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  const errors: number[] = [];
  const fitted: string[] = [];
  const batchCell = (b: { share: number; membersPerBatch: number } | null | undefined) =>
    b ? `${b.membersPerBatch.toFixed(1)} (${(b.share * 100).toFixed(0)} %)` : '-';
  for (const row of calibration.rows) {
    const design = designOf(row.label, calibration);
    if (!design) continue;
    const { costs, deployment } = benchSetting(row, design, calibration);
    const result = simulate(design, costs, deployment, { requests: calibration.hot.members, budgetCoupons: calibration.hot.members / 2 });
    errors.push((result.requestsPerSecond - row.requestsPerSecond) / row.requestsPerSecond);
    const share = costs.statementShare;
    console.log(
      `| ${row.label} | ${row.requestsPerSecond.toFixed(0)} | ${result.requestsPerSecond.toFixed(0)} | ${pct(result.requestsPerSecond, row.requestsPerSecond)} | ` +
        `${row.p99Ms.toFixed(0)} | ${result.p99Ms.toFixed(0)} | ${row.lockHoldMs?.toFixed(2) ?? '-'} | ${result.lockHoldMs.toFixed(2)} | ` +
        `${(row.cpuMsPerRequest['PostgreSQL'] ?? 0).toFixed(2)} | ${result.dbCpuMsPerRequest.toFixed(2)} | ${batchCell(row.batching)} | ${batchCell(result.batching)} |`,
    );
    if (share)
      fitted.push(
        `${row.label}: ${(share.db * 100).toFixed(0)} % of PostgreSQL's work and ${(share.app * 100).toFixed(0)} % of the server's is the statement's, paid once a batch`,
      );
  }
  if (fitted.length)
    console.log(`
Fitted from each batched row and its unbatched row (statementShareOf):
  ${fitted.join('\n  ')}`);
  return errors;
}

/** The deployment's costs: the not-hot row's CPU per request for the server and PostgreSQL, the one-statement hold as measured; batched, the not-hot batched row's statement share. */
function deploymentCosts(calibration: Calibration, measuredCalibration: Calibration, batched: boolean): Costs {
  const reference = calibration.rows.find((r) => r.label.startsWith('not hot') && !isBatched(r.label)) ?? calibration.rows[0]!;
  // The hold's work is part of PostgreSQL's CPU per issued request, as in the bench's replay.
  const measuredHold = measuredCalibration.quietHoldMs;
  const costs: Costs = {
    appCpuMs: reference.cpuMsPerRequest['server'] ?? 1,
    dbCpuMs: Math.max(0, (reference.cpuMsPerRequest['PostgreSQL'] ?? 0.5) - referenceIssuedShare() * measuredHold),
    holdMs: calibration.quietHoldMs,
    commitMs: calibration.quietHoldMs,
  };
  if (!batched) return costs;
  const row = calibration.rows.find((r) => r.label.startsWith('not hot') && isBatched(r.label));
  if (!row) throw new Error('the calibration has no batched not-hot row: run npm run bench on this checkout');
  return { ...costs, statementShare: statementShareOf(row, reference) };
}

interface Candidate {
  design: Design;
  batchMax: number;
}

interface Answer {
  design: string;
  rttMs: number;
  processes: number;
  rows: string;
  dbCores: number;
  result: SimResult;
}

const labelOf = ({ design, batchMax }: Candidate) =>
  (design.kind === 'slots' ? `${design.rows} slot${design.rows === 1 ? '' : 's'}` : design.kind) +
  (batchMax > 1 ? `, batched (${batchMax})` : '');

/**
 * The smallest configuration that keeps up with `rate`, searched from what the CPU alone needs
 * upward: the fewest database cores, then the fewest server processes. A batched design's CPU per
 * request depends on its batches, which grow with what each process has waiting: fewer processes
 * carry larger batches, so each count of processes is tried with the database cores it needs.
 */
function smallestKeepingUp(candidate: Candidate, costs: Costs, rttMs: number, rate: number, requests: number): Answer {
  const { design, batchMax } = candidate;
  const workload = { requests, budgetCoupons: requests / 2 };
  const share = batchMax > 1 ? (costs.statementShare ?? { db: 0, app: 0 }) : { db: 0, app: 0 };
  // Below these even batches of every request at once could not keep up.
  const minProcesses = Math.max(1, Math.ceil((rate * costs.appCpuMs * (1 - share.app)) / 1000 / 0.8));
  const minDb = Math.max(1, Math.ceil((rate * (costs.dbCpuMs + costs.holdMs / 2) * (1 - share.db)) / 1000 / 0.8));
  const rowsOf = (p: number) =>
    design.kind === 'slots' ? String(design.rows) : design.kind === 'leases' ? `${p} leases + 1 budget row` : '1';
  const run = (p: number, d: number): Answer => {
    const deployment = { ratePerSecond: rate, processes: p, poolPerProcess: POOL_PER_PROCESS, dbCores: d, rttMs, batchMax };
    return {
      design: labelOf(candidate),
      rttMs,
      processes: p,
      rows: rowsOf(p),
      dbCores: d,
      result: simulate(design, costs, deployment, workload, 1, HOPELESS),
    };
  };
  if (batchMax <= 1) return unbatchedSearch(run, minProcesses, minDb, rate);
  let best: Answer | null = null;
  let last: Answer | null = null;
  for (const extra of [0, 1, 2, 3, 4, 6, 8, 12, 16, 24]) {
    const p = minProcesses + extra;
    // The fewest cores this many processes keep up on, if any within the reach of the unbatched design's.
    for (let d = minDb; d <= Math.max(minDb + 24, 2 * minDb) && (!best || d < best.dbCores); d++) {
      last = run(p, d);
      if (keepsUp(last.result, rate)) {
        if (!best || d < best.dbCores) best = last;
        break;
      }
      // Behind with the database's cores not even busy: the processes are short, more cores will not help.
      if (last.result.overloaded && last.result.dbBusyCores < 0.8 * d) break;
    }
  }
  return best ?? last!;
}

/** The unbatched designs' search: processes and cores grown together from their floors. */
function unbatchedSearch(run: (p: number, d: number) => Answer, minProcesses: number, minDb: number, rate: number): Answer {
  let last: Answer | null = null;
  for (const extra of [0, 1, 2, 4, 8]) {
    for (const [p, d] of [
      [minProcesses + extra, minDb + Math.floor(extra / 2)],
      [minProcesses + Math.floor(extra / 2), minDb + extra],
    ] as const) {
      last = run(p, d);
      if (keepsUp(last.result, rate)) return last;
    }
  }
  return last!;
}

const keepsUp = (r: SimResult, rate: number) =>
  !r.overloaded && r.requestsPerSecond >= rate * KEEPS_UP && r.p99Ms < P99_LIMIT_MS && r.tryAgain === 0;

function answer(calibration: Calibration, measured: Calibration, rate: number, requests: number) {
  const costs = deploymentCosts(calibration, measured, false);
  const batchedCosts = hasBatchedRows(calibration) ? deploymentCosts(calibration, measured, true) : null;
  const batchMax = calibration.batchMax ?? DEFAULT_BATCH_MAX;
  console.log(
    `\n${rate.toLocaleString('en')} coupons/s offered (Poisson), ${requests.toLocaleString('en')} requests sold out half-way; a server process is one thread on a core of its own, ` +
      `${POOL_PER_PROCESS} connections; per request ${costs.appCpuMs.toFixed(2)} ms of server CPU and ${costs.dbCpuMs.toFixed(2)} ms of PostgreSQL CPU ` +
      `besides the hold (the not-hot row), and ${costs.holdMs.toFixed(2)} ms of PostgreSQL work while an issue holds its budget row (one client, one row). ` +
      (batchedCosts?.statementShare
        ? `Batched (COUPON_ISSUE_BATCH_MAX=${batchMax}): ${(batchedCosts.statementShare.db * 100).toFixed(0)} % of PostgreSQL's work and ` +
          `${(batchedCosts.statementShare.app * 100).toFixed(0)} % of the server's paid once a statement (the not-hot batched row). `
        : '') +
      `PostgreSQL's cores and each process's core shared by processor sharing. Keeps up: ` +
      `${KEEPS_UP * 100} % of the rate answered, p99 under ${P99_LIMIT_MS} ms, no TRY_AGAIN.\n`,
  );
  console.log(
    '| design | round trip | server processes | budget rows | database cores | req/s | p99 ms | PostgreSQL CPU ms/req | issues per batch (share batched) | stranded at first refusal (coupons) | stranded at end | keeps up |',
  );
  console.log('| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  const candidates: Candidate[] = [
    ...[1, 2, 4, 16].map((rows) => ({ design: { kind: 'slots', rows } as Design, batchMax: 1 })),
    { design: { kind: 'leases', leaseCoupons: calibration.hot.leaseCoupons }, batchMax: 1 },
    { design: { kind: 'serializable' }, batchMax: 1 },
    ...(batchedCosts ? [1, 16].map((rows) => ({ design: { kind: 'slots', rows } as Design, batchMax })) : []),
  ];
  const opening: OpeningCandidate[] = [];
  for (const rttMs of [1, 5]) {
    for (const candidate of candidates) {
      const candidateCosts = candidate.batchMax > 1 ? batchedCosts! : costs;
      const found = smallestKeepingUp(candidate, candidateCosts, rttMs, rate, requests);
      const r = found.result;
      const ok = keepsUp(r, rate);
      // A run stopped as hopeless has work begun for requests never answered: no per-request figures.
      const batch =
        r.batching && !r.overloaded ? `${r.batching.membersPerBatch.toFixed(1)} (${(r.batching.share * 100).toFixed(0)} %)` : '-';
      console.log(
        `| ${found.design} | ${rttMs} ms | ${found.processes} | ${found.rows} | ${found.dbCores} | ${r.requestsPerSecond.toFixed(0)} | ${r.p99Ms.toFixed(1)} | ` +
          `${r.overloaded ? '-' : r.dbCpuMsPerRequest.toFixed(2)} | ${batch} | ` +
          `${r.overloaded ? '-' : r.strandedAtFirstRefusal} | ${r.overloaded ? '-' : r.strandedAtEnd} | ${ok ? 'yes' : r.overloaded ? 'no: falls behind' : `no (TRY_AGAIN ${r.tryAgain})`} |`,
      );
      if (rttMs === 1 && ok && candidate.design.kind !== 'serializable') {
        opening.push({
          ...found,
          label: found.design,
          design: candidate.design,
          costs: candidateCosts,
          batchMax: candidate.batchMax,
          poolPerProcess: POOL_PER_PROCESS,
        });
      }
    }
  }
  if (batchedCosts) lowLoad(costs, batchedCosts, batchMax);
  openingSecond(rate, opening);
}

const hasBatchedRows = (calibration: Calibration) => calibration.rows.some((r) => isBatched(r.label) && r.batching);

/** The line the low-load table shows beside the coalescer's SIDE_BY_SIDE: two side by side, the model's earlier pick. */
const OTHER_SIDE_BY_SIDE = 2;

/** What batching costs a request when there is little to batch: the same offered load with and without, on a process or two. */
function lowLoad(costs: Costs, batchedCosts: Costs, batchMax: number) {
  console.log(
    '\nAt low load (one budget row, 1 ms round trip, 4 database cores): the latency batching adds where a process has little waiting, ' +
      `with ${OTHER_SIDE_BY_SIDE} statement(s) of a line side by side and with ${SIDE_BY_SIDE} (the coalescer's SIDE_BY_SIDE)\n`,
  );
  console.log(
    `| coupons/s | server processes | p50 ms unbatched | p50 ms batched, ${OTHER_SIDE_BY_SIDE} side by side | p50 ms batched | ` +
      `p99 ms unbatched | p99 ms batched, ${OTHER_SIDE_BY_SIDE} side by side | p99 ms batched | issues per batch (share batched) |`,
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const [rate, processes] of [
    [50, 1],
    [200, 1],
    [500, 2],
    [1_000, 2],
  ] as const) {
    const deployment = { ratePerSecond: rate, processes, poolPerProcess: POOL_PER_PROCESS, dbCores: 4, rttMs: 1 };
    const workload = { requests: Math.max(2_000, rate * 10), budgetCoupons: Math.max(2_000, rate * 10) };
    const plain = simulate({ kind: 'slots', rows: 1 }, costs, deployment, workload);
    const other = simulate({ kind: 'slots', rows: 1 }, batchedCosts, { ...deployment, batchMax, sideBySide: OTHER_SIDE_BY_SIDE }, workload);
    const batched = simulate({ kind: 'slots', rows: 1 }, batchedCosts, { ...deployment, batchMax }, workload);
    console.log(
      `| ${rate} | ${processes} | ${plain.p50Ms.toFixed(2)} | ${other.p50Ms.toFixed(2)} | ${batched.p50Ms.toFixed(2)} | ` +
        `${plain.p99Ms.toFixed(2)} | ${other.p99Ms.toFixed(2)} | ${batched.p99Ms.toFixed(2)} | ${batchCell(batched)} |`,
    );
  }
}

const batchCell = (r: SimResult) =>
  r.batching ? `${r.batching.membersPerBatch.toFixed(1)} (${(r.batching.share * 100).toFixed(0)} %)` : '-';

/** Statements of a line side by side before an issue waits, tried against the bench's reference rows. */
const SIDE_BY_SIDE_TRIED = [1, 2, 3, 4, 6, 8];
const SWEEP_CLIENTS = [1, 8, 32, 128];
const SWEEP_SEEDS = [1, 2, 3];

/**
 * How many statements a line should let run side by side: the bench's reference campaigns (the
 * not-hot rows, 1 ms round trip, on the bench's machine as calibrated) at 1, 8, 32 and 128
 * clients, batched with each count against unbatched, means of three seeds. Few side by side
 * batch more under load; at a handful of clients they make issues wait for too little to batch.
 */
function sideBySideSweep(calibration: Calibration) {
  const unbatchedRow = calibration.rows.find((r) => r.label.startsWith('not hot') && !isBatched(r.label));
  const batchedRow = calibration.rows.find((r) => r.label.startsWith('not hot') && isBatched(r.label) && r.batching);
  if (!unbatchedRow || !batchedRow) return;
  const design = designOf(unbatchedRow.label, calibration)!;
  const plain = benchSetting(unbatchedRow, design, calibration);
  const batched = benchSetting(batchedRow, design, calibration);
  const mean = (run: (seed: number) => SimResult) => {
    const results = SWEEP_SEEDS.map(run);
    const of = (f: (r: SimResult) => number) => results.reduce((sum, r) => sum + f(r), 0) / results.length;
    return { rate: of((r) => r.requestsPerSecond), p99: of((r) => r.p99Ms), share: of((r) => r.batching?.share ?? 0) };
  };
  console.log(
    `\nStatements of a line side by side before an issue waits (SIDE_BY_SIDE, ${SIDE_BY_SIDE} in the coalescer): the bench's ` +
      `reference campaigns at 1 ms round trip, batched against unbatched (req/s ratio, p99 difference in ms, share batched), ` +
      `means of ${SWEEP_SEEDS.length} seeds of 20,000 requests\n`,
  );
  console.log(`| side by side | ${SWEEP_CLIENTS.map((c) => `${c} client${c === 1 ? '' : 's'}`).join(' | ')} |`);
  console.log(`| ---: | ${SWEEP_CLIENTS.map(() => '---:').join(' | ')} |`);
  const workload = { requests: 20_000, budgetCoupons: 20_000 };
  const unbatched = SWEEP_CLIENTS.map((clients) =>
    mean((seed) => simulate(design, plain.costs, { ...plain.deployment, clients }, workload, seed)),
  );
  for (const sideBySide of SIDE_BY_SIDE_TRIED) {
    const cells = SWEEP_CLIENTS.map((clients, i) => {
      const r = mean((seed) => simulate(design, batched.costs, { ...batched.deployment, clients, sideBySide }, workload, seed));
      const p99 = r.p99 - unbatched[i]!.p99;
      return `${(r.rate / unbatched[i]!.rate).toFixed(2)}x, ${p99 >= 0 ? '+' : ''}${p99.toFixed(1)} ms, ${(r.share * 100).toFixed(0)} %`;
    });
    console.log(`| ${sideBySide} | ${cells.join(' | ')} |`);
  }
}

async function main() {
  const { calibration: file, rate, requests, holdMs } = parseArgs(process.argv.slice(2));
  const measured = await readCalibration(file);
  const calibration = holdMs === null ? measured : { ...measured, quietHoldMs: holdMs };
  const errors = replayBench(calibration);
  const worst = Math.max(...errors.map(Math.abs));
  console.log(`\nworst req/s error against the bench: ${(worst * 100).toFixed(1)} % (target within 20 %)`);
  answer(calibration, measured, rate, requests);
  sideBySideSweep(calibration);
}

if (process.argv[1]?.endsWith('main.ts')) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.stack : error);
    process.exit(1);
  });
}
