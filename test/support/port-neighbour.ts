import { createServer } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { createLogger } from '../../src/core/logger.js';
import { startEmbeddedPostgres } from '../../src/dev/embedded-postgres.js';
import { unusedLoopbackPort } from '../../src/dev/loopback-port.js';
import { listenOnLoopback } from './ports.js';

/**
 * One test file's worth of servers, started and stopped round after round: an embedded
 * PostgreSQL and an HTTP server, each then asked who it is. Run as a process of its own beside
 * another like it (test/embedded-postgres-ports.slow.test.ts), it prints one JSON line per round and exits 1 at the
 * first round that met a server not its own or could not start.
 *
 * Usage: port-neighbour.ts <data folder> <rounds> [own|fixed]; `fixed` picks the PostgreSQL port
 * beforehand, as the suite once did (the naive twin), `own` leaves it to the start (port 0).
 */
const [dataDir, rounds, mode = 'own'] = process.argv.slice(2);
const log = createLogger('warn');

async function askPostgres(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return (await client.query<{ dir: string }>("select current_setting('data_directory') as dir")).rows[0]!.dir;
  } finally {
    await client.end();
  }
}

async function round(index: number): Promise<{ round: number; postgresPort: number; httpPort: number }> {
  const port = mode === 'fixed' ? await unusedLoopbackPort() : 0;
  const postgres = await startEmbeddedPostgres({ dataDir: dataDir!, port, log, ephemeral: true });
  const token = `${process.pid}-${index}`;
  const http = await listenOnLoopback(createServer((_request, response) => response.end(token)));
  try {
    const answeredDir = await askPostgres(postgres.connectionString());
    if (answeredDir !== (await realpath(postgres.dataDir))) throw new Error(`PostgreSQL on ${postgres.port} is ${answeredDir}, not ours`);
    const answeredToken = await (await fetch(`${http.origin}/`)).text();
    if (answeredToken !== token) throw new Error(`HTTP on ${http.port} answered ${answeredToken}, not ${token}`);
    return { round: index, postgresPort: postgres.port, httpPort: http.port };
  } finally {
    await http.close();
    await postgres.stop();
  }
}

await mkdir(path.dirname(dataDir!), { recursive: true });
for (let index = 0; index < Number(rounds); index++) {
  try {
    console.log(JSON.stringify(await round(index)));
  } catch (error) {
    console.log(JSON.stringify({ round: index, error: (error as Error).message }));
    process.exit(1);
  }
}
