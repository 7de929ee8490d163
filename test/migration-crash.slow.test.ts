import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDirectTestDatabaseUrl } from './support/harness.js';
import { MIGRATOR_PROCESS_APP } from './support/migrator-process.js';
import { captureOutput } from './support/scripts.js';
import { waitFor } from './support/wait.js';

// kill -9 of start-up's migrate step (a process of its own, against PostgreSQL) in each phase of a
// CREATE INDEX CONCURRENTLY build of migration 011, then a run to the end: every index valid and
// each migration recorded once. Migrations 011 and 012 are made pending again in a database of the
// test's own; a session of the test's holds the migrator in the phase, and SQL tells when it is there.

const PROJECT = fileURLToPath(new URL('..', import.meta.url));
const MIGRATOR_SCRIPT = fileURLToPath(new URL('./support/migrator-process.ts', import.meta.url));
const INDEXES: Record<string, string> = {
  '011_outbox_sent_index': 'outbox_events_sent',
  '012_huddle_sessions_ended_index': 'huddle_sessions_ended',
};
const VERSIONS = Object.keys(INDEXES);
const KILLED_BUILD = INDEXES['011_outbox_sent_index']!;
const PHASE_TIMEOUT_MS = 180_000;

type Migrator = 'server' | 'naive';

/** The migrate step as its own process (node itself, so that SIGKILL reaches it, not a wrapper). */
function startMigrator(databaseUrl: string, migrator: Migrator, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', MIGRATOR_SCRIPT, ...(migrator === 'naive' ? ['naive'] : [])], {
    cwd: PROJECT,
    env: { ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'info', ENV_FILE: '/dev/null', DATABASE_URL: databaseUrl, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = captureOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output, exited };
}

async function connect(url: string, applicationName: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName });
  await client.connect();
  return client;
}

/** A database whose migrations 011 and 012 have not run: their indexes gone, their records too. */
async function databaseWithBuildsPending(): Promise<string> {
  const url = await createDirectTestDatabaseUrl();
  const admin = await connect(url, 'crash-test-admin');
  try {
    for (const index of Object.values(INDEXES)) await admin.query(`drop index concurrently if exists ${index}`);
    await admin.query('delete from schema_migrations where version = any($1)', [VERSIONS]);
  } finally {
    await admin.end();
  }
  return url;
}

async function indexState(db: pg.Client, name: string): Promise<'absent' | 'valid' | 'invalid'> {
  const { rows } = await db.query<{ valid: boolean }>(
    'select i.indisvalid and i.indisready as valid from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = $1',
    [name],
  );
  if (rows.length === 0) return 'absent';
  return rows[0]!.valid ? 'valid' : 'invalid';
}

async function migratorWaitsForLock(db: pg.Client): Promise<boolean> {
  const { rowCount } = await db.query(
    "select 1 from pg_stat_activity where application_name = $1 and datname = current_database() and wait_event_type = 'Lock'",
    [MIGRATOR_PROCESS_APP],
  );
  return (rowCount ?? 0) > 0;
}

/** The builds the migrator wrote down (none where the migrator keeps no such table). */
async function buildsRecorded(db: pg.Client): Promise<string[]> {
  const { rows: table } = await db.query<{ name: string | null }>("select to_regclass('schema_migration_builds')::text as name");
  if (!table[0]?.name) return [];
  const { rows } = await db.query<{ index_name: string }>('select index_name from schema_migration_builds order by 1');
  return rows.map((row) => row.index_name);
}

interface Phase {
  name: string;
  /** What the test's own session does to hold the migrator in the phase (in a transaction it ends after the kill). */
  hold: string[];
  /** The migrator is in the phase. */
  reached(db: pg.Client): Promise<boolean>;
  /** Settings of the killed run. */
  env?: Record<string, string>;
}

const PHASES: Phase[] = [
  {
    name: '(a) the build written down, CREATE INDEX waiting for the table behind a lock (no index yet)',
    hold: ['begin', 'lock table outbox_events in share update exclusive mode'],
    reached: async (db) =>
      (await buildsRecorded(db)).includes(KILLED_BUILD) && (await indexState(db, KILLED_BUILD)) === 'absent' && migratorWaitsForLock(db),
  },
  {
    name: '(b) during the build: the index there and invalid, the build waiting behind a writer',
    hold: ['begin', 'lock table outbox_events in row exclusive mode'],
    reached: async (db) => (await indexState(db, KILLED_BUILD)) === 'invalid' && migratorWaitsForLock(db),
  },
  {
    // The backend of a killed migrator builds on until it notices the socket closed: here it would
    // wait for the writer, which the test ends only once that backend is gone.
    name: '(b) during the build, its lock wait allowed 10 minutes (MIGRATION_LOCK_TIMEOUT_MS): the backend left waiting behind the writer',
    hold: ['begin', 'lock table outbox_events in row exclusive mode'],
    reached: async (db) => (await indexState(db, KILLED_BUILD)) === 'invalid' && migratorWaitsForLock(db),
    env: { MIGRATION_LOCK_TIMEOUT_MS: '600000' },
  },
  {
    name: '(c) after the build, before the record: the index valid, the record waiting behind a row of the test',
    hold: ['begin', "insert into schema_migrations (version) values ('011_outbox_sent_index')"],
    reached: async (db) => (await indexState(db, KILLED_BUILD)) === 'valid' && migratorWaitsForLock(db),
  },
];

interface Outcome {
  leftBehind: { backendEndedMs: number; index: string; builds: string[]; recorded: boolean };
  rerun: { code: number | null; ms: number; applied: string; invalid: string[]; records: Record<string, number>; builds: string[] };
}

/** Kills the migrator in `phase`, then runs it again to its end; what the kill left, and what the rerun did. */
async function killInPhaseAndRerun(phase: Phase, migrator: Migrator): Promise<Outcome> {
  const url = await databaseWithBuildsPending();
  const observer = await connect(url, 'crash-test-observer');
  const holder = await connect(url, 'crash-test-holder');
  try {
    for (const statement of phase.hold) await holder.query(statement);
    const killed = startMigrator(url, migrator, phase.env);
    await waitFor(async () => ((await phase.reached(observer)) ? true : undefined), `migrator in phase ${phase.name}`, 60_000).catch(
      (error: Error) => {
        killed.child.kill('SIGKILL');
        throw new Error(`${error.message}; migrator printed:\n${killed.output()}`);
      },
    );
    killed.child.kill('SIGKILL');
    const killedAt = Date.now();
    await killed.exited;
    // Its backend ends once it finds the socket closed (a statement ends, or the connection check).
    await waitFor(
      async () => {
        const { rowCount } = await observer.query(
          'select 1 from pg_stat_activity where application_name = $1 and datname = current_database()',
          [MIGRATOR_PROCESS_APP],
        );
        return rowCount === 0 ? true : undefined;
      },
      'end of the killed migrator backend',
      30_000,
    );
    const backendEndedMs = Date.now() - killedAt;
    const { rowCount } = await observer.query('select 1 from schema_migrations where version = $1', [VERSIONS[0]]);
    const leftBehind = {
      backendEndedMs,
      index: await indexState(observer, KILLED_BUILD),
      builds: await buildsRecorded(observer),
      recorded: rowCount === 1,
    };
    await holder.query('rollback');

    const started = Date.now();
    const rerun = startMigrator(url, migrator);
    const code = await rerun.exited;
    const ms = Date.now() - started;
    const { rows: invalid } = await observer.query<{ name: string }>(
      'select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid where not (i.indisvalid and i.indisready)',
    );
    const { rows: records } = await observer.query<{ version: string; n: number }>(
      'select version, count(*)::int as n from schema_migrations where version = any($1) group by version',
      [VERSIONS],
    );
    return {
      leftBehind,
      rerun: {
        code,
        ms,
        applied: /"applied":(\[[^\]]*\])/.exec(rerun.output())?.[1] ?? rerun.output().slice(-600),
        invalid: invalid.map((row) => row.name),
        records: Object.fromEntries(VERSIONS.map((v) => [v, records.find((r) => r.version === v)?.n ?? 0])),
        builds: await buildsRecorded(observer),
      },
    };
  } finally {
    await holder.end().catch(() => undefined);
    await observer.end();
  }
}

/** What is wrong after the rerun: it failed, an index is invalid or missing, a migration is not recorded once, a build is still open. */
function violations(outcome: Outcome): string[] {
  const { rerun } = outcome;
  const found: string[] = [];
  if (rerun.code !== 0) found.push(`the rerun exited ${rerun.code}: ${rerun.applied}`);
  if (rerun.invalid.length > 0) found.push(`indexes left invalid: ${rerun.invalid.join(', ')}`);
  for (const [version, n] of Object.entries(rerun.records)) if (n !== 1) found.push(`${version} recorded ${n} times`);
  if (rerun.builds.length > 0) found.push(`builds still open: ${rerun.builds.join(', ')}`);
  return found;
}

const describeOutcome = (phase: Phase, migrator: Migrator, outcome: Outcome) =>
  `${migrator} migrator killed in ${phase.name}: its backend gone ${outcome.leftBehind.backendEndedMs} ms after the kill, left index ${outcome.leftBehind.index}, builds written down ${JSON.stringify(outcome.leftBehind.builds)}, ` +
  `011 recorded ${outcome.leftBehind.recorded}; rerun exited ${outcome.rerun.code} in ${outcome.rerun.ms} ms, applied ${outcome.rerun.applied}, ` +
  `invalid after ${JSON.stringify(outcome.rerun.invalid)}, records ${JSON.stringify(outcome.rerun.records)}`;

describe('a CREATE INDEX CONCURRENTLY migration whose migrator is killed (kill -9)', () => {
  for (const phase of PHASES) {
    it(
      `in phase ${phase.name}: the next run ends with every index valid and each migration recorded once`,
      async ({ annotate }) => {
        const outcome = await killInPhaseAndRerun(phase, 'server');
        await annotate(describeOutcome(phase, 'server', outcome));
        expect(violations(outcome)).toEqual([]);
      },
      PHASE_TIMEOUT_MS,
    );
  }

  it(
    "the migrator that takes the invalid indexes it finds for someone else's (test/naive) records 011 with its index invalid after (b)",
    async ({ annotate }) => {
      const phase = PHASES[1]!;
      const outcome = await killInPhaseAndRerun(phase, 'naive');
      await annotate(describeOutcome(phase, 'naive', outcome));
      expect(outcome.leftBehind.index).toBe('invalid');
      expect(violations(outcome)).toContain(`indexes left invalid: ${KILLED_BUILD}`);
    },
    PHASE_TIMEOUT_MS,
  );
});
