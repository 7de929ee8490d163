import { randomBytes } from 'node:crypto';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { sql, type KyselyPlugin } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig, type AppConfig } from '../../src/core/config.js';
import type { Clock } from '../../src/core/clock.js';
import { createDatabase, type Database } from '../../src/db/database.js';
import { applySessionTimeouts } from '../../src/db/session-defaults.js';
import { runInTransaction } from '../../src/db/transaction.js';
import type { AppServices } from '../../src/graphql/context.js';
import { createApp, type App } from '../../src/http/app.js';
import { listen, type RunningServer } from '../../src/http/node-server.js';
import { createLogger, type Logger } from '../../src/core/logger.js';
import { databaseOptions } from '../../src/process/open-database.js';
import { buildServices, type StandIns } from '../../src/services/services.js';
import { startTracing } from '../../src/core/tracing.js';
import { databaseUrl } from './database-url.js';

/** The application_name of a test backend's pool: a test reads its sessions in pg_stat_activity or on the wire by it. */
export const TEST_APP = 'test-app';

/** A fresh database cloned from the migrated template, as the app reaches it (through PgBouncer when the run uses one); each test file gets its own. */
export async function createTestDatabaseUrl(): Promise<string> {
  return databaseUrl(await createDatabaseFrom(inject('templateDatabase')), inject('appUrl'));
}

/** The same, reached on PostgreSQL itself even when the run goes through PgBouncer: for tests of the wire protocol. */
export async function createDirectTestDatabaseUrl(): Promise<string> {
  return databaseUrl(await createDatabaseFrom(inject('templateDatabase')), inject('adminUrl'));
}

/** A fresh database with no schema of ours at all (what an adopter starts from). */
export async function createEmptyDatabaseUrl(): Promise<string> {
  return databaseUrl(await createDatabaseFrom('template1'), inject('appUrl'));
}

/** Creates a database from `template`; returns its name. */
async function createDatabaseFrom(template: string): Promise<string> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: inject('adminUrl') });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${template}`);
  } finally {
    await admin.end();
  }
  return name;
}

export interface TestBackend {
  app: App;
  config: AppConfig;
  services: AppServices;
  database: Database;
  databaseUrl: string;
  /** A separate pool for the test's own SQL: counting rows, planting data. */
  sql: pg.Pool;
  log: Logger;
  close(): Promise<void>;
}

/**
 * For a test that sends many anonymous requests back to back and is not about the anonymous rate
 * (2 a second by default, test/anonymous-flood.test.ts): without it each would wait for its token.
 */
export const UNLIMITED_ANONYMOUS = { ANONYMOUS_RATE: '10000', ANONYMOUS_BURST: '10000' };

export interface TestBackendOptions {
  /** Environment variables as a user would set them (strings). */
  env?: Record<string, string>;
  clock?: Clock;
  log?: Logger;
  /** Reuse a database instead of cloning a new one. */
  databaseUrl?: string;
  /** Told of every statement the app sends through Kysely (not BEGIN and COMMIT), by its node kind. */
  onStatement?: (kind: string) => void;
  /** Stand-ins for the product's parts, by name: a naive twin, a peer design. */
  standIns?: StandIns;
}

/** A Kysely plugin that reports each statement and changes nothing. */
function statementWatcher(onStatement: (kind: string) => void): KyselyPlugin {
  return {
    transformQuery: ({ node }) => {
      onStatement(node.kind);
      return node;
    },
    transformResult: async ({ result }) => result,
  };
}

export async function createTestBackend(options: TestBackendOptions = {}): Promise<TestBackend> {
  const url = options.databaseUrl ?? (await createTestDatabaseUrl());
  // DB_PREPARED_STATEMENTS=false reaches every backend of the run (CI's pass through PgBouncer sets it),
  // and COUPON_ISSUE_BATCH_MAX (the coupon suites' pass with issue batching off: 1).
  const inherited = Object.fromEntries(
    ['DB_PREPARED_STATEMENTS', 'COUPON_ISSUE_BATCH_MAX'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
  );
  const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: url, ...inherited, ...options.env });
  // Tracing, when the test configures an OTLP endpoint: one exporter per process, this backend's.
  const stopTracing = startTracing(config.tracing);
  const log = options.log ?? createLogger(process.env['TEST_LOG_LEVEL'] ?? 'silent');
  const database = createDatabase(
    {
      ...databaseOptions(config, url, TEST_APP),
      ...(options.onStatement ? { plugins: [statementWatcher(options.onStatement)] } : {}),
    },
    log,
  );
  // As the server does at start-up: what a coupon issue sent as one statement runs under.
  await applySessionTimeouts(url, config.database, log);
  const services = buildServices(config, database, log, options.clock, options.standIns);
  const app = createApp(services);
  const sql = new pg.Pool({ connectionString: url, max: 4 });
  sql.on('error', () => {});
  return {
    app,
    config,
    services,
    database,
    databaseUrl: url,
    sql,
    log,
    async close() {
      await services.budgetLeases.stop();
      await database.close();
      await sql.end();
      await stopTracing();
    },
  };
}

/**
 * Holds one of the app's pool connections in a transaction of the test's own until `release()`, so
 * that requests meanwhile find it taken (with DB_POOL_MAX=1, an exhausted pool). `held` resolves
 * once the connection is held: waiting for it, not for a guessed time, keeps a busy machine from
 * letting the test's request in first; it rejects when the holder got no connection. `done` ends
 * with the holder's transaction. The transaction's deadline caps its timeouts, so it is the
 * longest the connection can be held.
 */
export function holdPoolConnection(backend: Pick<TestBackend, 'database' | 'services'>, deadlineMs: number) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let holding!: () => void;
  const held = new Promise<void>((resolve) => (holding = resolve));
  const done = runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + deadlineMs }, async (trx) => {
    await sql`select 1`.execute(trx);
    holding();
    await released;
  });
  return { held: Promise.race([held, done.then(() => undefined)]), release, done };
}

/** Phrases only PostgreSQL's own messages use: none may reach a client. */
export const DATABASE_WORDS = /relation "|violates|duplicate key|at or near|column "|sqlstate|postgres/i;

export type Headers = Record<string, string>;

export const asUser = (tenantId: string, userId = 'member-1'): Headers => ({
  'x-hasura-role': 'user',
  'x-hasura-tenant-id': tenantId,
  'x-hasura-user-id': userId,
});
export const asTenantAdmin = (tenantId: string): Headers => ({ 'x-hasura-role': 'admin', 'x-hasura-tenant-id': tenantId });
export const asOperator = (): Headers => ({ 'x-hasura-role': 'operator' });

export interface GraphQLResponse<T> {
  status: number;
  headers: globalThis.Headers;
  body: { data?: T | null; errors?: { message: string; path?: string[]; extensions?: Record<string, unknown> }[] };
  text: string;
}

type Fetcher = (request: Request) => Promise<Response>;

/** Sends one GraphQL request through the full HTTP pipeline (in process, or over a socket). */
export async function gql<T, V>(
  target: Fetcher | string,
  document: TypedDocumentNode<T, V> | string,
  variables?: V,
  headers: Headers = {},
): Promise<GraphQLResponse<T>> {
  const query = typeof document === 'string' ? document : print(document);
  const init: RequestInit = {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  };
  const response = typeof target === 'string' ? await fetch(target, init) : await target(new Request('http://test.local/graphql', init));
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: JSON.parse(text), text };
}

/** The data of a request that must succeed; fails the test with the errors otherwise. */
export async function gqlOk<T, V>(
  target: Fetcher | string,
  document: TypedDocumentNode<T, V> | string,
  variables?: V,
  headers: Headers = {},
): Promise<T> {
  const response = await gql(target, document, variables, headers);
  if (response.body.errors?.length || !response.body.data) {
    throw new Error(`GraphQL request failed: ${JSON.stringify(response.body.errors ?? response.body)}`);
  }
  return response.body.data;
}

/** Calls a Hasura action through the full HTTP pipeline, as Hasura does: POST /actions with the action's name, its `input` argument and the session variables. */
export function callAction(
  target: Fetcher,
  name: string,
  input: Record<string, unknown>,
  sessionVariables: Record<string, unknown>,
  headers: Headers = {},
): Promise<Response> {
  return target(
    new Request('http://test.local/actions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ action: { name }, input: { input }, session_variables: sessionVariables }),
    }),
  );
}

export function errorCodes(response: GraphQLResponse<unknown>): unknown[] {
  return (response.body.errors ?? []).map((e) => e.extensions?.['code']);
}

/** A real socket in front of the app, for tests that need HTTP as a client sees it. */
export async function serveOverHttp(backend: TestBackend): Promise<{ url: string; server: RunningServer }> {
  const server = await listen(backend.app, 0, backend.log, '127.0.0.1', backend.config.server);
  return { url: `http://127.0.0.1:${server.port}/graphql`, server };
}

/** A test backend of its own, served on a socket of its own. */
export interface ServedBackend extends TestBackend {
  /** The GraphQL endpoint: `http://127.0.0.1:<port>/graphql`. */
  url: string;
  /** `http://127.0.0.1:<port>`, for the other routes. */
  origin: string;
  port: number;
  server: RunningServer;
  /** Closes the socket, then the backend. */
  close(): Promise<void>;
}

/** createTestBackend, then serveOverHttp: for tests that need a backend only as a client sees it over HTTP. */
export async function serveTestBackend(options: TestBackendOptions = {}): Promise<ServedBackend> {
  const backend = await createTestBackend(options);
  const { url, server } = await serveOverHttp(backend).catch(async (error: unknown) => {
    await backend.close();
    throw error;
  });
  return {
    ...backend,
    url,
    origin: new URL(url).origin,
    port: server.port,
    server,
    async close() {
      await server.close();
      await backend.close();
    },
  };
}

export async function createTenant(backend: TestBackend, id: string, monthlyCapYen = 2000) {
  await backend.sql.query('insert into tenants (id, name, monthly_cap_yen) values ($1, $2, $3)', [id, `Tenant ${id}`, monthlyCapYen]);
}

export async function createContractRow(backend: TestBackend, tenantId: string, title = 'Contract'): Promise<string> {
  const { rows } = await backend.sql.query<{ id: string }>('insert into contracts (tenant_id, title) values ($1, $2) returning id', [
    tenantId,
    title,
  ]);
  return rows[0]!.id;
}
