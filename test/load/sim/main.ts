import { referenceScenario } from '../scenarios/coupons.js';
import { readCalibration, type CalibratedRow, type Calibration } from './calibration.js';
import { simulate, type Costs, type Design, type Deployment, type SimResult } from './hot-path.js';

const USAGE = `usage: npm run sim [-- --calibration FILE] [--rate 10000] [--requests 20000] [--hold-ms MS]

Replays the bench's hot rows (1 ms round trip, 128 clients, sold out half-way) with the costs the
bench measured on its machine (test/load/sim/calibration.json, written by npm run bench), prints
measured and simulated side by side, then answers: how many server processes, budget rows or
leases and database cores issue --rate coupons per second at 1 ms and at 5 ms round trip, with what
p99 and stranded budget, for budget slots, budget leases and SERIALIZABLE. --hold-ms replaces the measured one-client hold: what if a budget row
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

/** The design a bench row measured. */
export function designOf(label: string, calibration: Calibration): Design | null {
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
  const cpu = row.cpuMsPerRequest;
  const ours = Object.values(cpu).reduce((sum, ms) => sum + ms, 0);
  const ourCores = (ours * row.requestsPerSecond) / 1000;
  const others = Math.max(0, row.machineBusyCores - ourCores);
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
    costs: {
      // A transaction's server CPU goes to its round trips and to the request itself in equal parts; one statement has it all around its trip.
      appCpuMs: (cpu['server'] ?? 0) / (design.kind === 'serializable' ? trips + 1 : 1),
      appCpuMsPerTrip: design.kind === 'serializable' ? (cpu['server'] ?? 0) / (trips + 1) : 0,
      // The serializable transaction's dbCpuMs is that of one attempt that commits, spread over its statements.
      dbCpuMs: design.kind === 'serializable' ? (outsideHold / trips) * SERIALIZABLE_TRIPS.issued : outsideHold,
      holdMs,
      commitMs: holdMs,
      proxyCpuMsPerTrip: (cpu['delay proxy'] ?? 0) / trips,
      generatorCpuMs: cpu['load generator'] ?? 0,
    },
    deployment: {
      clients: calibration.hot.clients,
      processes: 1,
      poolPerProcess: POOL_PER_PROCESS,
      dbCores: calibration.cores,
      sharedCores: Math.max(0.25, calibration.cores - others),
      rttMs: calibration.proxyRttMs,
    },
  };
}

const pct = (sim: number, measured: number) => `${(((sim - measured) / measured) * 100).toFixed(0)} %`;

function replayBench(calibration: Calibration): number[] {
  console.log(
    `Calibration: ${calibration.machine}, commit ${calibration.commit}, measured ${calibration.measured}; ` +
      `round trip through the proxy ${calibration.proxyRttMs} ms nominal (select 1: ${calibration.rttMs.toFixed(2)} ms, ${calibration.directRttMs.toFixed(2)} ms direct)\n`,
  );
  console.log(
    '| bench row (128 clients, 1 ms) | req/s measured | req/s simulated | error | p99 ms measured | p99 ms simulated | lock hold ms measured | lock hold ms simulated |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  const errors: number[] = [];
  for (const row of calibration.rows) {
    const design = designOf(row.label, calibration);
    if (!design) continue;
    const { costs, deployment } = benchSetting(row, design, calibration);
    const result = simulate(design, costs, deployment, { requests: calibration.hot.members, budgetCoupons: calibration.hot.members / 2 });
    errors.push((result.requestsPerSecond - row.requestsPerSecond) / row.requestsPerSecond);
    console.log(
      `| ${row.label} | ${row.requestsPerSecond.toFixed(0)} | ${result.requestsPerSecond.toFixed(0)} | ${pct(result.requestsPerSecond, row.requestsPerSecond)} | ` +
        `${row.p99Ms.toFixed(0)} | ${result.p99Ms.toFixed(0)} | ${row.lockHoldMs?.toFixed(2) ?? '-'} | ${result.lockHoldMs.toFixed(2)} |`,
    );
  }
  return errors;
}

/** The deployment's costs: the not-hot row's CPU per request for the server and PostgreSQL, the one-statement hold as measured. */
function deploymentCosts(calibration: Calibration, measuredCalibration: Calibration): Costs {
  const reference = calibration.rows.find((r) => r.label.startsWith('not hot')) ?? calibration.rows[0]!;
  // The hold's work is part of PostgreSQL's CPU per issued request, as in the bench's replay.
  const measuredHold = measuredCalibration.quietHoldMs;
  return {
    appCpuMs: reference.cpuMsPerRequest['server'] ?? 1,
    dbCpuMs: Math.max(0, (reference.cpuMsPerRequest['PostgreSQL'] ?? 0.5) - referenceIssuedShare() * measuredHold),
    holdMs: calibration.quietHoldMs,
    commitMs: calibration.quietHoldMs,
  };
}

interface Answer {
  design: string;
  rttMs: number;
  processes: number;
  rows: string;
  dbCores: number;
  result: SimResult | null;
}

/** The smallest configuration that keeps up with `rate`, searched from what the CPU alone needs upward. */
function smallestKeepingUp(design: Design, costs: Costs, rttMs: number, rate: number, requests: number): Answer & { design: string } {
  const workload = { requests, budgetCoupons: requests / 2 };
  const minProcesses = Math.max(1, Math.ceil((rate * costs.appCpuMs) / 1000 / 0.8));
  const minDb = Math.max(1, Math.ceil((rate * costs.dbCpuMs) / 1000 / 0.8));
  const label = design.kind === 'slots' ? `${design.rows} slot${design.rows === 1 ? '' : 's'}` : design.kind;
  const rowsOf = (p: number) =>
    design.kind === 'slots' ? String(design.rows) : design.kind === 'leases' ? `${p} leases + 1 budget row` : '1';
  let last: Answer | null = null;
  for (const extra of [0, 1, 2, 4, 8]) {
    for (const [p, d] of [
      [minProcesses + extra, minDb + Math.floor(extra / 2)],
      [minProcesses + Math.floor(extra / 2), minDb + extra],
    ] as const) {
      const deployment = { ratePerSecond: rate, processes: p, poolPerProcess: POOL_PER_PROCESS, dbCores: d, rttMs };
      const result = simulate(design, costs, deployment, workload, 1, HOPELESS);
      last = { design: label, rttMs, processes: p, rows: rowsOf(p), dbCores: d, result };
      if (keepsUp(result, rate)) return last;
    }
  }
  return last!;
}

const keepsUp = (r: SimResult, rate: number) =>
  !r.overloaded && r.requestsPerSecond >= rate * KEEPS_UP && r.p99Ms < P99_LIMIT_MS && r.tryAgain === 0;

function answer(calibration: Calibration, measured: Calibration, rate: number, requests: number) {
  const costs = deploymentCosts(calibration, measured);
  console.log(
    `\n${rate.toLocaleString('en')} coupons/s offered (Poisson), ${requests.toLocaleString('en')} requests sold out half-way; a server process is one thread on a core of its own, ` +
      `${POOL_PER_PROCESS} connections; per request ${costs.appCpuMs.toFixed(2)} ms of server CPU and ${costs.dbCpuMs.toFixed(2)} ms of PostgreSQL CPU ` +
      `besides the hold (the not-hot row), and ${costs.holdMs.toFixed(2)} ms of PostgreSQL work while an issue holds its budget row (one client, one row). ` +
      `PostgreSQL's cores and each process's core shared by processor sharing. Keeps up: ` +
      `${KEEPS_UP * 100} % of the rate answered, p99 under ${P99_LIMIT_MS} ms, no TRY_AGAIN.\n`,
  );
  console.log(
    '| design | round trip | server processes | budget rows | database cores | req/s | p99 ms | stranded at first refusal (coupons) | stranded at end | keeps up |',
  );
  console.log('| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |');
  const designs: Design[] = [
    { kind: 'slots', rows: 1 },
    { kind: 'slots', rows: 2 },
    { kind: 'slots', rows: 4 },
    { kind: 'slots', rows: 16 },
    { kind: 'leases', leaseCoupons: calibration.hot.leaseCoupons },
    { kind: 'serializable' },
  ];
  for (const rttMs of [1, 5]) {
    for (const design of designs) {
      const found = smallestKeepingUp(design, costs, rttMs, rate, requests);
      const r = found.result!;
      const ok = keepsUp(r, rate);
      console.log(
        `| ${found.design} | ${rttMs} ms | ${found.processes} | ${found.rows} | ${found.dbCores} | ${r.requestsPerSecond.toFixed(0)} | ${r.p99Ms.toFixed(1)} | ` +
          `${r.overloaded ? '-' : r.strandedAtFirstRefusal} | ${r.overloaded ? '-' : r.strandedAtEnd} | ${ok ? 'yes' : r.overloaded ? 'no: falls behind' : `no (TRY_AGAIN ${r.tryAgain})`} |`,
      );
    }
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
}

if (process.argv[1]?.endsWith('main.ts')) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.stack : error);
    process.exit(1);
  });
}
