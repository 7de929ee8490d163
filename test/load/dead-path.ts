import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { figures, loadAtRate, pollReady, type Sample, type Trial } from '../support/dead-path.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { LoadClient } from './client.js';
import { startScratchDatabase, startServerProcess, type ServerProcess } from './target.js';

/**
 * The dead-path trials at the server's default settings (REQUEST_DEADLINE_MS 10 s,
 * STATEMENT_TIMEOUT_MS 5 s, a pool of 10), against the server as its own process with a fault
 * proxy between it and a fresh PostgreSQL, printing the figures docs/operations.md quotes:
 *
 *   tsx test/load/dead-path.ts [--rate 40] [--blackhole-seconds 20]
 *
 * 1. a blackhole of 20 s at 40 requests/s: the latency of the requests it caught;
 * 2. a blackhole for good: how fast /ready says 503, the latency of TRY_AGAIN once the server
 *    knows, and how long SIGTERM takes to end the server;
 * 3. the existing connections frozen, new ones flowing: how long until every request succeeds.
 *
 * A request without an answer after NO_ANSWER_MS counts as one that never answered.
 */
const NO_ANSWER_MS = 60_000;

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
}

const RATE = flag('--rate', 40);
const BLACKHOLE_S = flag('--blackhole-seconds', 20);
const HEALTHY_MS = 5_000;

interface Run {
  proxy: FaultProxy;
  server: ServerProcess;
  client: LoadClient;
  trial: Trial;
  base: string;
  stop(): Promise<void>;
}

async function start(tenantId: string): Promise<Run> {
  const database = await startScratchDatabase();
  const target = new URL(database.databaseUrl);
  const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  sql.on('error', () => {});
  const server = await startServerProcess('src/entry/main.ts', { DATABASE_URL: proxy.url(database.databaseUrl), LOG_LEVEL: 'error' });
  await sql.query('insert into tenants (id, name) values ($1, $1)', [tenantId]);
  const contractId = (await sql.query<{ id: string }>("insert into contracts (tenant_id, title) values ($1, 'C') returning id", [tenantId]))
    .rows[0]!.id;
  const client = new LoadClient(server.url, 400);
  await client.open();
  const trial: Trial = { graphqlUrl: server.url, sql, tenantId, contractId };
  // Every pool connection opened and idle, as on a server that has been busy.
  await Promise.all(
    Array.from({ length: 30 }, () =>
      client.graphql('{ contracts(first: 1) { id } }', {}, { 'x-hasura-role': 'admin', 'x-hasura-tenant-id': tenantId }),
    ),
  );
  return {
    proxy,
    server,
    client,
    trial,
    base: server.url.replace(/\/graphql$/, ''),
    async stop() {
      client.close();
      await proxy.close();
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
      await sql.end();
      await database.stop();
    },
  };
}

/** The load of a trial, with a request that never answers counted as NO_ANSWER after NO_ANSWER_MS. */
async function withNoAnswerCutoff(run: Promise<Sample[]>, cutoffAt: number): Promise<Sample[]> {
  const finished = await Promise.race([run, sleep(Math.max(0, cutoffAt - performance.now()), null)]);
  return finished ?? [];
}

const line = (label: string, samples: Sample[]) => `  ${label.padEnd(42)} ${JSON.stringify(figures(samples))}`;

async function blackholeTrial() {
  const run = await start('blackhole');
  try {
    const blackholeMs = BLACKHOLE_S * 1000;
    const total = HEALTHY_MS + blackholeMs + 10_000;
    const samples: Sample[] = [];
    const load = loadAtRate(run.client, run.trial, RATE, total, 'bh', (sample) => samples.push(sample));
    await sleep(HEALTHY_MS);
    run.proxy.blackhole();
    await sleep(blackholeMs);
    run.proxy.heal();
    await withNoAnswerCutoff(load.done, load.started + total + NO_ANSWER_MS);
    const caught = samples.filter((s) => s.sentMs < HEALTHY_MS + blackholeMs && s.sentMs + s.latencyMs > HEALTHY_MS);
    console.log(`1. blackhole of ${BLACKHOLE_S} s at ${RATE} requests/s`);
    console.log(line('requests it caught (answered after it began)', caught));
    console.log(
      line(
        'sent after it healed',
        samples.filter((s) => s.sentMs >= HEALTHY_MS + blackholeMs),
      ),
    );
  } finally {
    await run.stop();
  }
}

async function permanentTrial() {
  const run = await start('for-good');
  try {
    const deadMs = 30_000;
    const samples: Sample[] = [];
    const load = loadAtRate(run.client, run.trial, RATE, HEALTHY_MS + deadMs, 'fg', (sample) => samples.push(sample));
    const ready = pollReady(`${run.base}/ready`, load.started);
    await sleep(HEALTHY_MS);
    run.proxy.blackhole();
    await sleep(deadMs);
    // SIGTERM while requests hang on the dead path.
    const signalled = performance.now();
    run.server.child.kill('SIGTERM');
    const exited = await Promise.race([
      new Promise<boolean>((resolve) => run.server.child.once('close', () => resolve(true))),
      sleep(NO_ANSWER_MS, false),
    ]);
    const exitMs = performance.now() - signalled;
    const polls = await ready.stop();
    const unready = polls.find((poll) => poll.atMs > HEALTHY_MS && poll.status !== 200);
    console.log(`2. blackhole for good at ${RATE} requests/s`);
    console.log(
      `  /ready not 200 after                       ${unready ? `${Math.round(unready.atMs - HEALTHY_MS)} ms (${unready.status})` : 'never'}`,
    );
    console.log(
      line(
        'sent in its first 10 s',
        samples.filter((s) => s.sentMs >= HEALTHY_MS && s.sentMs < HEALTHY_MS + 10_000),
      ),
    );
    console.log(
      line(
        'sent 10 s or more after it began',
        samples.filter((s) => s.sentMs >= HEALTHY_MS + 10_000),
      ),
    );
    console.log(
      line(
        'answered at all (of all sent during it)',
        samples.filter((s) => s.sentMs >= HEALTHY_MS),
      ),
    );
    console.log(
      `  SIGTERM                                    ${exited ? `exited after ${Math.round(exitMs)} ms` : `still running after ${NO_ANSWER_MS} ms (SIGKILL)`}`,
    );
  } finally {
    await run.stop();
  }
}

async function frozenTrial() {
  const run = await start('frozen');
  try {
    const frozenMs = 50_000;
    const samples: Sample[] = [];
    const load = loadAtRate(run.client, run.trial, RATE, HEALTHY_MS + frozenMs, 'fz', (sample) => samples.push(sample));
    await sleep(HEALTHY_MS);
    run.proxy.freezeExisting();
    await withNoAnswerCutoff(load.done, load.started + HEALTHY_MS + frozenMs + NO_ANSWER_MS);
    const after = samples.filter((s) => s.sentMs >= HEALTHY_MS);
    const failing = after.filter((s) => s.code !== 'OK');
    const lastFailure = failing.length ? Math.max(...failing.map((s) => s.sentMs)) - HEALTHY_MS : 0;
    console.log(`3. existing connections frozen, new ones flowing, at ${RATE} requests/s for ${frozenMs / 1000} s`);
    console.log(
      `  recovered                                  ${
        lastFailure < frozenMs - 5_000
          ? `every request sent ${Math.round(lastFailure)} ms or more after the freeze succeeded`
          : 'not before the run ended'
      }`,
    );
    console.log(line('sent after the freeze', after));
    console.log(
      `  never answered (within ${NO_ANSWER_MS / 1000} s)                ${Math.ceil((RATE * (HEALTHY_MS + frozenMs)) / 1000) - samples.length}`,
    );
  } finally {
    await run.stop();
  }
}

async function main() {
  const only = process.argv.indexOf('--only') >= 0 ? process.argv[process.argv.indexOf('--only') + 1] : null;
  if (!only || only === 'blackhole') await blackholeTrial();
  if (!only || only === 'permanent') await permanentTrial();
  if (!only || only === 'frozen') await frozenTrial();
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
