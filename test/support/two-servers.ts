import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/dev/embedded-postgres.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from './ports.js';
import { migrateDatabaseAt } from './tool-database.js';

/**
 * Two PostgreSQL servers of a test's own that stand in for the nodes of an HA cluster: one that
 * accepts writes and one that does not (default_transaction_read_only, which a session sees
 * exactly as it sees a hot standby: transaction_read_only is on and a write fails with 25006),
 * swapped as a failover swaps them. The real failover, with Patroni and replication, is
 * test/patroni.failover.test.ts.
 */
export const PASSWORD = 'failover-test-password';
export const DATABASE = 'app';

export interface Server {
  postgres: EmbeddedPostgres;
  admin: pg.Pool;
}

export async function startServer(root: string, name: string): Promise<Server> {
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(root, name),
    port: await freePort(),
    log: createLogger('silent'),
    ephemeral: true,
  });
  const admin = new pg.Pool({ connectionString: postgres.connectionString('postgres'), max: 1 });
  admin.on('error', () => {});
  // One password for both, as the servers of one HA cluster share their users.
  await admin.query(`alter user postgres password '${PASSWORD}'`);
  await admin.query(`create database ${DATABASE}`);
  await migrateDatabaseAt(url(postgres.port));
  return { postgres, admin };
}

export const url = (port: number) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;

/** Writes on or off for every session of the server, the ones open now included (they read the setting at their next transaction). */
export async function acceptWrites(server: Server, writes: boolean) {
  await server.admin.query(
    writes ? 'alter system reset default_transaction_read_only' : 'alter system set default_transaction_read_only = on',
  );
  await server.admin.query('select pg_reload_conf()');
  // pg_reload_conf() only signals the postmaster; the switch is done once the postmaster has read
  // the file (a new session, forked from it, sees the setting), which it does before it signals
  // the sessions already open, and those apply it before their next command.
  const expected = writes ? 'off' : 'on';
  for (;;) {
    const client = new pg.Client({ connectionString: url(server.postgres.port) });
    await client.connect();
    try {
      const { rows } = await client.query<{ default_transaction_read_only: string }>('show default_transaction_read_only');
      if (rows[0]!.default_transaction_read_only === expected) return;
    } finally {
      await client.end();
    }
    await sleep(20);
  }
}

export async function tenantsOn(server: Server, prefix: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url(server.postgres.port) });
  await client.connect();
  try {
    return (await client.query<{ id: string }>('select id from tenants where id like $1 order by id', [`${prefix}%`])).rows.map(
      (r) => r.id,
    );
  } finally {
    await client.end();
  }
}
