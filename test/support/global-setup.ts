import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/dev/embedded-postgres.js';
import { createLogger } from '../../src/core/logger.js';
import { startPgBouncerOnUnusedPort } from './pgbouncer.js';
import { databaseUrl } from './database-url.js';
import { migrateDatabaseAt } from './tool-database.js';
import { endProcessesOfLedger, PROCESS_LEDGER_VARIABLE } from './processes.js';

/**
 * One PostgreSQL per test run: the embedded one in a temporary folder, or the server
 * TEST_DATABASE_URL names. A migrated template database is made once; every test file clones its own from it.
 */
export const TEMPLATE_DATABASE = 'app_test_template';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the server's maintenance database; tests create their own databases. */
    adminUrl: string;
    /** Where the app and the tests connect: the server itself, or PgBouncer in front of it. */
    appUrl: string;
    templateDatabase: string;
    embeddedDataDir: string | null;
  }
}

function serverOf(url: string) {
  const parsed = new URL(url);
  return { port: Number(parsed.port || 5432), user: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) };
}

function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.port = String(port);
  return parsed.toString();
}

async function buildTemplate(adminUrl: string) {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${TEMPLATE_DATABASE} with (force)`);
    await admin.query(`create database ${TEMPLATE_DATABASE}`);
  } finally {
    await admin.end();
  }
  await migrateDatabaseAt(databaseUrl(TEMPLATE_DATABASE, adminUrl), { applicationName: 'test-template', acquireTimeoutMs: 10_000 });
}

/**
 * The run's ledger of the processes tests start (test/support/processes.ts): the workers inherit
 * its name from this process. The teardown ends what is still recorded, whatever the tests did.
 */
async function openProcessLedger(): Promise<{ end(): Promise<string[]> }> {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-processes-'));
  const ledger = path.join(folder, 'ledger');
  await writeFile(ledger, '');
  process.env[PROCESS_LEDGER_VARIABLE] = ledger;
  return {
    async end() {
      try {
        return await endProcessesOfLedger(ledger);
      } finally {
        await rm(folder, { recursive: true, force: true });
      }
    },
  };
}

/** The variables of the configuration table in docs/operations.md: what `npm start` and the tools read. */
function configurationVariables(): string[] {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Configuration$/m)[1]!.split(/^## /m)[0]!;
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]!));
}

/**
 * A developer's settings never reach a test: the shell's PORT, DATABASE_URL, EMBEDDED_PG_*, LOG_LEVEL…
 * are removed from this process before the workers start (they and every process a test starts
 * inherit what is left), and no entry point a test starts reads the checkout's `.env`
 * (ENV_FILE=/dev/null) unless the test names a file. DB_PREPARED_STATEMENTS stays: CI's pass
 * through PgBouncer sets it for the whole run (test/support/harness.ts).
 */
function forgetDeveloperSettings() {
  for (const name of configurationVariables()) if (name !== 'DB_PREPARED_STATEMENTS') delete process.env[name];
  process.env['ENV_FILE'] = '/dev/null';
}

export default async function setup(project: TestProject) {
  const ledger = await openProcessLedger();
  // The run's own server, when one is named for it (TEST_DATABASE_URL); never the shell's DATABASE_URL.
  let adminUrl = process.env['TEST_DATABASE_URL'];
  const sharedDir = process.env['EMBEDDED_PG_SHARED_DIR'] || undefined;
  forgetDeveloperSettings();
  let embedded: EmbeddedPostgres | null = null;
  let tempRoot: string | null = null;
  if (!adminUrl) {
    // A folder the postgres user can enter even when the project sits under /root.
    tempRoot = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-test-'));
    await chmod(tempRoot, 0o755);
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(tempRoot, 'data'),
      port: 0,
      log: createLogger(process.env['PG_LOG_LEVEL'] ?? 'warn'),
      ephemeral: true,
      maxConnections: 400,
      sharedDir,
    });
    adminUrl = embedded.connectionString('postgres');
  }
  await buildTemplate(adminUrl);
  // PGBOUNCER=<path of the pgbouncer binary>: every app and test connection goes through a
  // PgBouncer in transaction mode; only creating databases talks to PostgreSQL directly.
  const bouncerBinary = process.env['PGBOUNCER'];
  const bouncer = bouncerBinary ? await startPgBouncerOnUnusedPort(bouncerBinary, serverOf(adminUrl)) : null;
  const appUrl = bouncer ? withPort(adminUrl, bouncer.port) : adminUrl;
  if (bouncer) project.vitest.logger.log(`tests connect through PgBouncer (transaction mode) on port ${bouncer.port}`);
  project.provide('adminUrl', adminUrl);
  project.provide('appUrl', appUrl);
  project.provide('templateDatabase', TEMPLATE_DATABASE);
  project.provide('embeddedDataDir', embedded?.dataDir ?? null);

  return async () => {
    try {
      // First: a server a test left running holds connections to the run's PostgreSQL.
      const ended = await ledger.end();
      if (ended.length > 0) project.vitest.logger.warn(`ended ${ended.length} processes tests left running:\n  ${ended.join('\n  ')}`);
    } finally {
      await bouncer?.stop();
      await embedded?.stop();
      if (tempRoot) await rm(tempRoot, { recursive: true, force: true });
    }
  };
}
