import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/dev/embedded-postgres.js';
import { createLogger } from '../../src/logger.js';
import { startPgBouncer } from './pgbouncer.js';
import { freePort } from './ports.js';
import { databaseUrl } from './database-url.js';
import { migrateDatabaseAt } from './tool-database.js';

/**
 * One PostgreSQL per test run: the embedded one in a temporary folder, or the server DATABASE_URL
 * names. A migrated template database is made once; every test file clones its own from it.
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

export default async function setup(project: TestProject) {
  let embedded: EmbeddedPostgres | null = null;
  let tempRoot: string | null = null;
  let adminUrl = process.env['DATABASE_URL'];
  if (!adminUrl) {
    // A folder the postgres user can enter even when the project sits under /root.
    tempRoot = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-test-'));
    await chmod(tempRoot, 0o755);
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(tempRoot, 'data'),
      port: await freePort(),
      log: createLogger(process.env['PG_LOG_LEVEL'] ?? 'warn'),
      ephemeral: true,
      maxConnections: 400,
      sharedDir: process.env['EMBEDDED_PG_SHARED_DIR'] || undefined,
    });
    adminUrl = embedded.connectionString('postgres');
  }
  await buildTemplate(adminUrl);
  // PGBOUNCER=<path of the pgbouncer binary>: every app and test connection goes through a
  // PgBouncer in transaction mode; only creating databases talks to PostgreSQL directly.
  const bouncerBinary = process.env['PGBOUNCER'];
  const bouncer = bouncerBinary ? await startPgBouncer(bouncerBinary, serverOf(adminUrl), await freePort()) : null;
  const appUrl = bouncer ? withPort(adminUrl, bouncer.port) : adminUrl;
  if (bouncer) project.vitest.logger.log(`tests connect through PgBouncer (transaction mode) on port ${bouncer.port}`);
  project.provide('adminUrl', adminUrl);
  project.provide('appUrl', appUrl);
  project.provide('templateDatabase', TEMPLATE_DATABASE);
  project.provide('embeddedDataDir', embedded?.dataDir ?? null);

  return async () => {
    await bouncer?.stop();
    await embedded?.stop();
    if (tempRoot) await rm(tempRoot, { recursive: true, force: true });
  };
}
