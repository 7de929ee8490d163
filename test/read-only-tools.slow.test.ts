import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createEmptyDatabaseUrl, createTestDatabaseUrl } from './support/harness.js';
import { runScript } from './support/scripts.js';

async function tablesIn(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      "select table_name as name from information_schema.tables where table_schema = 'public'",
    );
    return rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

/** The tools beside the server use the schema they find: they never migrate a database. */
describe.each([
  ['npm run reconcile', 'src/entry/cli/reconcile.ts'],
  ['npm run worker', 'src/entry/worker/main.ts'],
])('%s', (_name, script) => {
  it('on a database without the schema: exit 2 with a message, and the database is left untouched', async () => {
    const url = await createEmptyDatabaseUrl();
    const { code, output } = await runScript(script, { DATABASE_URL: url });
    expect(output).toContain('This database has no schema of this project');
    expect(output).toContain('does not migrate');
    expect(code).toBe(2);
    expect(await tablesIn(url)).toEqual([]);
  });

  it('in production needs no ACTION_SECRET or JWT_SECRET: it answers no HTTP', async () => {
    const url = await createEmptyDatabaseUrl();
    const { code, output } = await runScript(script, { NODE_ENV: 'production', DATABASE_URL: url, ACTION_SECRET: '', JWT_SECRET: '' });
    expect(output).not.toContain('Configuration error');
    // It got as far as the database, and stopped there for the reason of the first test.
    expect(output).toContain('This database has no schema of this project');
    expect(code).toBe(2);
  });

  it('on a schema behind the code: exit 2 naming the migrations missing', async () => {
    const url = await createTestDatabaseUrl();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const { rows } = await client.query<{ version: string }>(
      'delete from schema_migrations where version = (select max(version) from schema_migrations) returning version',
    );
    await client.end();
    const { code, output } = await runScript(script, { DATABASE_URL: url });
    expect(output).toContain(`schema is behind this code: ${rows[0]!.version} not applied`);
    expect(code).toBe(2);
  });

  it('without DATABASE_URL: never creates an embedded database', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-tool-'));
    await chmod(root, 0o755);
    try {
      const dataDir = path.join(root, 'postgres');
      const { code, output } = await runScript(script, { EMBEDDED_PG_DATA_DIR: dataDir, DATABASE_URL: '' });
      expect(output).toContain(`No embedded database in ${dataDir} yet: npm start creates it`);
      expect(code).toBe(2);
      expect(existsSync(path.join(dataDir, 'PG_VERSION'))).toBe(false);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
