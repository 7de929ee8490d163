import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/core/config.js';
import { createLogger } from '../../src/core/logger.js';
import { openDatabase } from '../../src/process/open-database.js';
import { buildServices } from '../../src/services/services.js';
import { LoadClient } from './client.js';
import { measureCpu } from './cpu.js';
import { runLoad } from './run.js';
import { couponLoad, headerSessions, insertCouponScenario, referenceScenario } from './scenarios/coupons.js';
import {
  BENCH_ACTION_SECRET,
  benchServerEnv,
  currentCommit,
  machineDescription,
  startScratchDatabase,
  startServerProcess,
  startSpanSink,
} from './target.js';

const USAGE = `usage: npm run profile [-- --server endpoint|bare] [--members 600] [--concurrency 32] [--top 15] [--keep FILE] [--project DIR] [--compiled] [--traced] [--keyed]

Profiles one server process with node --cpu-prof under the bench's coupon load: the project's
server as the bench runs it (NODE_ENV=production, workers off), or the bench's bare node:http
server around the same unit. After a warm-up it sends the reference scenario (--members x 6
requests) at --concurrency clients, then prints the server's CPU per request and the functions
that took the most CPU time themselves (self time) while that load ran, idle excluded, with each
one's share of the busy time, then the same by package; then what the server allocated per
request while that load ran (V8's sampling heap profiler, collected objects included), by the
function that allocated it and by package.

--keep FILE   also keep the profile of the measured load (open it in Chrome DevTools or speedscope), and
              its allocations beside it as FILE.heapprofile (DevTools' Memory tab loads it)
--project DIR profile the endpoint of another checkout (its own npm ci done), as the bench's --baseline
--compiled    the production build: compiles the project (npm run build) and runs dist/entry/main.js on
              plain node, as npm run start:prod does, instead of the bench's server from source under tsx
--traced      the endpoint with tracing on as the bench's traced row runs it: every request sampled,
              every span exported to a collector that keeps nothing
--keyed       every request with an Idempotency-Key of its own, as the bench's keyed row sends them`;

const ENTRIES = { endpoint: 'test/load/bench-server.ts', bare: 'test/load/bare-server.ts' } as const;
/** The production build's entry (npm run build), which --compiled runs instead of the bench's server. */
const COMPILED_ENTRY = 'dist/entry/main.js';
/** Preloaded into the server: samples its allocations between two SIGUSR2 (see the file). */
const ALLOCATION_SAMPLER = fileURLToPath(new URL('./allocation-sampler.cjs', import.meta.url));
const WARM_UP_MEMBERS = 150;

function parseArgs(argv: string[]) {
  let server: keyof typeof ENTRIES = 'endpoint';
  let members = 600;
  let concurrency = 32;
  let top = 15;
  let keep: string | null = null;
  let project: string | null = null;
  let traced = false;
  let keyed = false;
  let compiled = false;
  const whole = (raw: string | undefined) => (raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : NaN);
  for (let i = 0; i < argv.length; i++) {
    const option = argv[i];
    if (option === '--server') server = argv[++i] as keyof typeof ENTRIES;
    else if (option === '--members') members = whole(argv[++i]);
    else if (option === '--concurrency') concurrency = whole(argv[++i]);
    else if (option === '--top') top = whole(argv[++i]);
    else if (option === '--keep') keep = argv[++i] ?? null;
    else if (option === '--project') project = argv[++i] ?? null;
    else if (option === '--traced') traced = true;
    else if (option === '--keyed') keyed = true;
    else if (option === '--compiled') compiled = true;
    else if (option === '--help') {
      console.log(USAGE);
      process.exit(0);
    } else {
      console.error(`unknown option ${option}\n\n${USAGE}`);
      process.exit(2);
    }
  }
  if (
    !(server in ENTRIES) ||
    !(members >= 3) ||
    !(concurrency >= 1) ||
    !(top >= 1) ||
    ((project !== null || traced || keyed || compiled) && server !== 'endpoint')
  ) {
    console.error(
      `--server is endpoint or bare (--project, --compiled, --traced and --keyed only with endpoint); --members (from 3), --concurrency and --top take whole numbers\n\n${USAGE}`,
    );
    process.exit(2);
  }
  return { server, members, concurrency, top, keep, project, traced, keyed, compiled };
}

/** The parts of V8's .cpuprofile read here. */
interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame }[];
  /** Microseconds on the monotonic clock, as process.hrtime. */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

/** The parts of V8's sampling heap profile read here: a tree of call frames, each with the bytes sampled where it allocated. */
interface AllocationNode {
  callFrame: CallFrame;
  selfSize: number;
  children: AllocationNode[];
}

interface Entry {
  name: string;
  /** Milliseconds of self time, or bytes allocated. */
  amount: number;
}

/** Where a function lives, short: a package and its file, a node: module, or the project's file. */
function whereOf(url: string, project: string): string {
  if (url === '') return '';
  const file = url.replace(/^file:\/\//, '');
  const inPackage = file.lastIndexOf('/node_modules/');
  if (inPackage >= 0) return file.slice(inPackage + '/node_modules/'.length);
  return file.startsWith(project) ? file.slice(project.length + 1) : file;
}

/** The package a location belongs to (`@whatwg-node/server`, `graphql`), `node:` for Node's own code, `project` for ours. */
function packageOf(where: string): string {
  if (where === '') return '(V8: GC, program)';
  if (where.startsWith('node:')) return 'node: (Node itself)';
  if (where.startsWith('src/') || where.startsWith('test/') || where.startsWith('dist/')) return 'project';
  const parts = where.split('/');
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/** Sums amounts by function and by package, largest first. */
class Totals {
  private readonly byFunction = new Map<string, number>();
  private readonly byPackage = new Map<string, number>();
  total = 0;

  constructor(private readonly project: string) {}

  add(frame: CallFrame, amount: number): void {
    const where = whereOf(frame.url, this.project);
    const name = `${frame.functionName || '(anonymous)'}${where ? ` ${where}:${frame.lineNumber + 1}` : ''}`;
    this.byFunction.set(name, (this.byFunction.get(name) ?? 0) + amount);
    this.byPackage.set(packageOf(where), (this.byPackage.get(packageOf(where)) ?? 0) + amount);
    this.total += amount;
  }

  sorted(): { functions: Entry[]; packages: Entry[] } {
    const sorted = (totals: Map<string, number>): Entry[] =>
      [...totals].map(([name, amount]) => ({ name, amount })).sort((a, b) => b.amount - a.amount);
    return { functions: sorted(this.byFunction), packages: sorted(this.byPackage) };
  }
}

/**
 * Self time per function over the samples taken between `fromUs` and `toUs` (the measured load),
 * idle excluded: each sample stands for the time until the next one.
 */
function selfTimes(profile: CpuProfile, fromUs: number, toUs: number, project: string) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const totals = new Totals(project);
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i]!;
    const lasted = profile.timeDeltas[i + 1] ?? 0;
    if (at < fromUs || at > toUs) continue;
    const frame = nodes.get(profile.samples[i]!)!;
    if (frame.functionName === '(idle)') continue;
    totals.add(frame, lasted / 1000);
  }
  return { busyMs: totals.total, ...totals.sorted() };
}

/** Bytes allocated per function (where the allocation was made) over the sampled window. */
function allocations(head: AllocationNode, project: string) {
  const totals = new Totals(project);
  const visit = (node: AllocationNode) => {
    if (node.selfSize > 0) totals.add(node.callFrame, node.selfSize);
    node.children.forEach(visit);
  };
  visit(head);
  return { bytes: totals.total, ...totals.sorted() };
}

/** The profile cut to the samples between `fromUs` and `toUs`: what a viewer should show of it. */
function measuredWindow(profile: CpuProfile, fromUs: number, toUs: number): CpuProfile {
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let at = profile.startTime;
  let last = fromUs;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i]!;
    if (at < fromUs || at > toUs) continue;
    samples.push(profile.samples[i]!);
    timeDeltas.push(at - last);
    last = at;
  }
  return { ...profile, startTime: fromUs, endTime: last, samples, timeDeltas } as CpuProfile;
}

function table(entries: Entry[], busyMs: number, requests: number, header: string): string {
  const lines = [`| # | ${header} | self ms | % of busy | µs per request |`, '| ---: | --- | ---: | ---: | ---: |'];
  entries.forEach((entry, i) =>
    lines.push(
      `| ${i + 1} | \`${entry.name}\` | ${entry.amount.toFixed(0)} | ${((100 * entry.amount) / busyMs).toFixed(1)} | ${((1000 * entry.amount) / requests).toFixed(0)} |`,
    ),
  );
  return lines.join('\n');
}

function allocationTable(entries: Entry[], bytes: number, requests: number, header: string): string {
  const lines = [`| # | ${header} | MB | % of allocated | bytes per request |`, '| ---: | --- | ---: | ---: | ---: |'];
  entries.forEach((entry, i) =>
    lines.push(
      `| ${i + 1} | \`${entry.name}\` | ${(entry.amount / 1e6).toFixed(1)} | ${((100 * entry.amount) / bytes).toFixed(1)} | ${(entry.amount / requests).toFixed(0)} |`,
    ),
  );
  return lines.join('\n');
}

/** The server to profile: the bench's (from source, under tsx), its bare one, or the production build. */
function serverEntry(server: keyof typeof ENTRIES, compiled: boolean, project: string): string {
  if (!compiled) return ENTRIES[server];
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: project, stdio: 'inherit' });
  return COMPILED_ENTRY;
}

async function main() {
  const { server, members, concurrency, top, keep, project: other, traced, keyed, compiled } = parseArgs(process.argv.slice(2));
  const project = other ? path.resolve(other) : path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
  const database = await startScratchDatabase();
  const profiles = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-profile-'));
  const config = loadConfig({ DATABASE_URL: database.databaseUrl, NODE_ENV: 'production', ACTION_SECRET: BENCH_ACTION_SECRET });
  const log = createLogger('silent');
  // Migrated here, so that the bare server (which never migrates) finds its schema; set-up goes straight to the tables.
  const opened = await openDatabase({ config, log, schema: 'migrate' }, 'profile-setup');
  const settings = buildServices(config, opened.database, log).transactions;
  const collector = traced ? await startSpanSink() : null;
  const tracingEnv: Record<string, string> = collector
    ? { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_on' }
    : {};
  const allocationFile = path.join(profiles, 'allocations.json');
  const started = await startServerProcess(
    serverEntry(server, compiled, project),
    { ...benchServerEnv(database.databaseUrl, 'conditional'), ...tracingEnv, ALLOCATION_PROFILE_FILE: allocationFile },
    {
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profiles}`, '--require', ALLOCATION_SAMPLER],
      ...(other ? { project } : {}),
    },
  );
  let running = true;
  const stopServer = async () => {
    if (running) await started.stop();
    running = false;
  };
  /** The reference scenario of `scaled` members through the server; `ready` is told when its set-up is done and the load begins. */
  const load = async (scaled: number, ready = () => {}) => {
    const scenario = referenceScenario(`prof${Date.now().toString(36)}`, scaled);
    const client = new LoadClient(started.url, concurrency);
    try {
      return await runLoad({
        client,
        sessions: headerSessions({ 'x-action-secret': BENCH_ACTION_SECRET }),
        scenario: {
          ...couponLoad(scenario, scaled * 6, { idempotencyKeys: keyed }),
          setup: async () => {
            await insertCouponScenario(opened.database.db, settings, scenario);
            ready();
          },
        },
        concurrency,
        amount: { requests: scaled * 6 },
        sql: null,
      });
    } finally {
      client.close();
    }
  };
  try {
    await load(WARM_UP_MEMBERS);
    // The measured load's window on the clock of the profile's timestamps (the monotonic one, in µs).
    let fromUs = 0;
    const cpu = measureCpu(() => ({ server: [started.child.pid!] }));
    // SIGUSR2 starts the allocation sampler as the measured load begins, and stops it as it ends (allocation-sampler.cjs).
    const result = await load(members, () => {
      fromUs = Number(process.hrtime.bigint() / 1000n);
      started.child.kill('SIGUSR2');
    });
    const toUs = Number(process.hrtime.bigint() / 1000n);
    started.child.kill('SIGUSR2');
    const used = cpu();
    await stopServer();
    const [file] = (await readdir(profiles)).filter((name) => name.endsWith('.cpuprofile'));
    if (!file) throw new Error('the server wrote no profile (it did not exit normally)');
    const profile = JSON.parse(await readFile(path.join(profiles, file), 'utf8')) as CpuProfile;
    if (keep) await writeFile(keep, JSON.stringify(measuredWindow(profile, fromUs, toUs)));
    const times = selfTimes(profile, fromUs, toUs, project);
    const allocationProfile = await readFile(allocationFile, 'utf8');
    if (keep) await writeFile(`${keep}.heapprofile`, allocationProfile);
    const allocated = allocations((JSON.parse(allocationProfile) as { head: AllocationNode }).head, project);
    const outcomes = Object.entries(result.outcomes)
      .map(([outcome, n]) => `${n} ${outcome}`)
      .join(', ');
    console.log(
      `${server === 'endpoint' ? `the project's ${compiled ? 'production build' : 'server'} (NODE_ENV=production, workers off)` : 'the bare node:http server around the same unit'}` +
        `${traced ? ' with tracing on (every request sampled and exported)' : ''}${keyed ? ', every request with an Idempotency-Key' : ''}, ` +
        `${result.requests} issueCoupon requests at ${concurrency} clients (${outcomes}): ${result.requestsPerSecond.toFixed(0)} req/s, ` +
        `server CPU ${((used.parts['server']! * 1000) / result.requests).toFixed(2)} ms per request, ` +
        `profiled busy ${(times.busyMs / result.requests).toFixed(2)} ms per request, ` +
        `allocated ${(allocated.bytes / result.requests / 1024).toFixed(1)} KB per request; ${machineDescription()}, ` +
        `${other ? `the checkout in ${other}` : `commit ${currentCommit()}`}, load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}\n`,
    );
    console.log(table(times.functions.slice(0, top), times.busyMs, result.requests, 'function (self time)'));
    console.log('');
    console.log(table(times.packages.slice(0, top), times.busyMs, result.requests, 'package'));
    console.log('');
    console.log(allocationTable(allocated.functions.slice(0, top), allocated.bytes, result.requests, 'function (allocated)'));
    console.log('');
    console.log(allocationTable(allocated.packages.slice(0, top), allocated.bytes, result.requests, 'package'));
    if (keep) console.log(`\nprofile kept in ${keep}, its allocations in ${keep}.heapprofile`);
  } finally {
    await stopServer();
    await opened.close();
    await database.stop();
    await collector?.close();
    await rm(profiles, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
