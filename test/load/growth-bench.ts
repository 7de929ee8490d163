import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { couponsScenario } from './scenarios/coupons.js';
import { huddlesScenario } from './scenarios/huddles.js';
import { startSteadyLoad } from './steady-load.js';
import { currentCommit, machineDescription, startScratchDatabase, startServerProcess } from './target.js';

/**
 * How fast the tables that grow with traffic grow: one scenario at a steady rate for some
 * minutes, against a server with its background loops on (outbox relay, huddle cleanup,
 * retention), with the size of each table (indexes included) read once a minute, and how many
 * of huddle_participants' updates (heartbeats, mostly) were HOT.
 *
 *   npm run bench:growth -- --scenario coupons --rate 50 --minutes 3
 *   npm run bench:growth -- --scenario huddles --rate 50 --minutes 3 --env HUDDLE_RETENTION_HOURS=0
 */

const TABLES = ['audit_log', 'outbox_events', 'huddle_sessions', 'huddle_participants', 'idempotency_keys'] as const;

interface Args {
  scenario: 'coupons' | 'huddles';
  rate: number;
  minutes: number;
  env: Record<string, string>;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { scenario: 'coupons', rate: 50, minutes: 3, env: {} };
  const usage = 'usage: npm run bench:growth -- [--scenario coupons|huddles] [--rate R] [--minutes M] [--env KEY=VALUE]';
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[++i];
    if (value === undefined) throw new Error(usage);
    if (flag === '--scenario' && (value === 'coupons' || value === 'huddles')) args.scenario = value;
    else if (flag === '--rate' && /^\d+$/.test(value)) args.rate = Number(value);
    else if (flag === '--minutes' && /^\d+$/.test(value)) args.minutes = Number(value);
    else if (flag === '--env' && value.includes('=')) {
      const [key, ...rest] = value.split('=');
      args.env[key!] = rest.join('=');
    } else throw new Error(usage);
  }
  return args;
}

interface Reading {
  minute: number;
  bytes: Record<string, number>;
  rows: Record<string, number>;
  participantUpdates: number;
  participantHotUpdates: number;
}

async function read(sql: pg.Pool, minute: number): Promise<Reading> {
  const bytes: Record<string, number> = {};
  const rows: Record<string, number> = {};
  for (const table of TABLES) {
    const { rows: found } = await sql.query<{ bytes: string; n: number }>(
      `select pg_total_relation_size($1::regclass)::text as bytes, (select count(*)::int from ${table}) as n`,
      [table],
    );
    bytes[table] = Number(found[0]!.bytes);
    rows[table] = found[0]!.n;
  }
  const { rows: stats } = await sql.query<{ upd: string; hot: string }>(
    "select n_tup_upd::text as upd, n_tup_hot_upd::text as hot from pg_stat_user_tables where relname = 'huddle_participants'",
  );
  return { minute, bytes, rows, participantUpdates: Number(stats[0]!.upd), participantHotUpdates: Number(stats[0]!.hot) };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const database = await startScratchDatabase();
  const server = await startServerProcess('src/entry/main.ts', { DATABASE_URL: database.databaseUrl, ...args.env });
  const sql = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
  sql.on('error', () => {});
  const runId = Date.now().toString(36);
  const scenario =
    args.scenario === 'coupons' ? couponsScenario(`growth-${runId}`, null) : huddlesScenario(`growth-${runId}`, 200, 5, null);
  const load = startSteadyLoad({ url: server.url, scenario, rate: args.rate, connections: 256 });
  await load.started;
  // Statistics reach pg_stat_user_tables when a backend reports them: read them fresh.
  await sql.query('select pg_stat_clear_snapshot()');
  const readings = [await read(sql, 0)];
  for (let minute = 1; minute <= args.minutes; minute++) {
    await sleep(60_000);
    readings.push(await read(sql, minute));
    console.error(`  minute ${minute}: ${TABLES.map((t) => `${t} ${(readings.at(-1)!.bytes[t]! / 1024).toFixed(0)} kB`).join(', ')}`);
  }
  const result = await load.stop();
  await sql.end();
  await server.stop();
  await database.stop();

  console.log(`growth bench: ${args.scenario} at ${args.rate} requests/s for ${args.minutes} min, ${JSON.stringify(args.env)}`);
  console.log(`commit ${currentCommit()}, ${machineDescription()}`);
  console.log(`requests ${result.requests}, outcomes ${JSON.stringify(result.outcomes)}`);
  console.log('kB added per minute (table and its indexes; rows at the end):');
  for (const table of TABLES) {
    const perMinute = readings.slice(1).map((r, i) => ((r.bytes[table]! - readings[i]!.bytes[table]!) / 1024).toFixed(0));
    console.log(`  ${table.padEnd(20)} ${perMinute.join(', ').padEnd(30)} rows ${readings.at(-1)!.rows[table]}`);
  }
  const last = readings.at(-1)!;
  const first = readings[0]!;
  const updates = last.participantUpdates - first.participantUpdates;
  const hot = last.participantHotUpdates - first.participantHotUpdates;
  console.log(`huddle_participants updates: ${updates}, HOT: ${hot} (${updates ? ((hot / updates) * 100).toFixed(1) : '0'} %)`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
