import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { loadConfig } from '../../src/core/config.js';
import { migrate } from '../../src/db/migrate.js';
import { MIGRATIONS_DIR } from '../../src/db/migration-ledger.js';
import { createLogger } from '../../src/core/logger.js';
import { couponsScenario } from './scenarios/coupons.js';
import { startSteadyLoad } from './steady-load.js';
import { openToolDatabase } from '../support/tool-database.js';
import { currentCommit, machineDescription, startScratchDatabase, startServerProcess } from './target.js';

/**
 * A deploy's migration while the coupon traffic runs: a reader holds `campaigns` for
 * `--reader-seconds` (a report, a dump), and a new migration alters that table, as the next
 * version's start-up would. Prints what the traffic saw (TRY_AGAIN, worst latency) and how long
 * the migration took.
 *
 *   npm run bench:migration -- --rate 60 --reader-seconds 15
 *   MIGRATION_LOCK_TIMEOUT_MS=200 npm run bench:migration
 */

interface Args {
  rate: number;
  readerSeconds: number;
  warmUpSeconds: number;
  tailSeconds: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { rate: 60, readerSeconds: 15, warmUpSeconds: 5, tailSeconds: 5 };
  const flags: Record<string, keyof Args> = {
    '--rate': 'rate',
    '--reader-seconds': 'readerSeconds',
    '--warm-up': 'warmUpSeconds',
    '--tail': 'tailSeconds',
  };
  for (let i = 0; i < argv.length; i++) {
    const key = flags[argv[i]!];
    const raw = argv[++i];
    if (!key || raw === undefined || !/^\d+$/.test(raw)) {
      throw new Error('usage: npm run bench:migration -- [--rate R] [--reader-seconds S] [--warm-up S] [--tail S]');
    }
    args[key] = Number(raw);
  }
  return args;
}

/** The project's migrations and one more that alters the table the hot path reads. */
async function migrationsWithAlter(): Promise<{ dir: string; version: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-migrations-'));
  for (const file of await readdir(MIGRATIONS_DIR)) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(dir, file));
  const version = '900_bench_campaign_note';
  await writeFile(path.join(dir, `${version}.sql`), 'ALTER TABLE campaigns ADD COLUMN bench_note text;\n');
  return { dir, version, remove: () => rm(dir, { recursive: true, force: true }) };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const database = await startScratchDatabase();
  const server = await startServerProcess('src/entry/main.ts', { DATABASE_URL: database.databaseUrl, RUN_WORKERS: 'false' });
  const migrations = await migrationsWithAlter();
  const reader = new pg.Client({ connectionString: database.databaseUrl });
  await reader.connect();
  // A report of its own making, not one of the server's statements: the role's STATEMENT_TIMEOUT_MS is not its limit.
  await reader.query('set statement_timeout = 0');
  const log = createLogger('warn');
  // The next version's start-up: its own pool, its own migration run.
  const next = openToolDatabase(database.databaseUrl, 'next-version', { max: 2, acquireTimeoutMs: 3_000, log });
  const scenario = couponsScenario(`migration-${Date.now().toString(36)}`, null);
  const load = startSteadyLoad({ url: server.url, scenario, rate: args.rate, connections: 256 });
  await load.started;
  const origin = performance.now();
  const at = () => ((performance.now() - origin) / 1000).toFixed(2);
  await sleep(args.warmUpSeconds * 1000);
  console.error(`  ${at()} s  reader starts: holds campaigns for ${args.readerSeconds} s`);
  const reading = reader.query(`select pg_sleep(${args.readerSeconds}), count(*) from campaigns`);
  await sleep(500);
  console.error(`  ${at()} s  migration starts: ${migrations.version}`);
  const migrationStarted = performance.now();
  let migrationOutcome: string;
  try {
    // MIGRATION_* from the environment, as the next version's start-up reads them.
    const applied = await migrate(next.db, migrations.dir, { settings: loadConfig(process.env).migrations });
    migrationOutcome = `applied ${applied.join(', ')}`;
  } catch (error) {
    migrationOutcome = `failed: ${(error as Error).message}`;
  }
  const migrationMs = performance.now() - migrationStarted;
  console.error(`  ${at()} s  migration ${migrationOutcome}`);
  await reading;
  await sleep(args.tailSeconds * 1000);
  const result = await load.stop();
  await reader.end();
  await next.close();
  await server.stop();
  await database.stop();
  await migrations.remove();

  console.log(`migration bench: ${args.rate} requests/s, a ${args.readerSeconds} s reader on campaigns, then ALTER TABLE campaigns`);
  console.log(`commit ${currentCommit()}, ${machineDescription()}`);
  console.log(`requests   ${result.requests}`);
  console.log(`outcomes   ${JSON.stringify(result.outcomes)}`);
  console.log(
    `latency    p50 ${result.latency.p50.toFixed(1)} ms, p99 ${result.latency.p99.toFixed(1)} ms, max ${result.latency.max.toFixed(1)} ms`,
  );
  console.log(`migration  ${migrationOutcome} in ${(migrationMs / 1000).toFixed(2)} s`);
  const stalled = result.samples.filter((s) => s.latencyMs > 1_000);
  console.log(`answers slower than 1 s: ${stalled.length}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
