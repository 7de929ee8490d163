import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { onUnusedPort } from '../../src/dev/loopback-port.js';

/**
 * A local PgBouncer in transaction mode in front of the test database, so the suites can prove
 * the app keeps no session state: every transaction may land on another server connection.
 */
export interface PgBouncer {
  port: number;
  stop(): Promise<void>;
}

function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  // PgBouncer refuses to run as root; the embedded PostgreSQL already made this user.
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  };
}

/** What PgBouncer logs when another program holds its port: it exits, and the start is tried on another port. */
const PORT_TAKEN = /Address already in use/;

/**
 * Ready once this PgBouncer logs that it listens on the port, never because something answers
 * there: another program's server on the port would be taken for it.
 */
async function waitUntilListening(port: number, child: ChildProcess, log: () => Promise<string>) {
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(100)) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`pgbouncer exited: ${await log()}`);
    if ((await log()).includes(`listening on 127.0.0.1:${port}`)) return;
  }
  throw new Error(`pgbouncer did not listen on ${port}: ${await log()}`);
}

/** A PgBouncer on an unused port: PgBouncer cannot take port 0, so a port taken first is tried again on another. */
export function startPgBouncerOnUnusedPort(binary: string, server: { port: number; user: string; password: string }): Promise<PgBouncer> {
  return onUnusedPort(
    (port) => startPgBouncer(binary, server, port),
    (error) => PORT_TAKEN.test(String(error)),
  );
}

async function startPgBouncer(binary: string, server: { port: number; user: string; password: string }, port: number): Promise<PgBouncer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pgbouncer-'));
  const owner = runAs();
  const config = [
    '[databases]',
    `* = host=127.0.0.1 port=${server.port} user=${server.user} password=${server.password}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    'max_client_conn = 2000',
    'default_pool_size = 40',
    'max_db_connections = 60',
    'ignore_startup_parameters = extra_float_digits',
    `logfile = ${path.join(dir, 'pgbouncer.log')}`,
    '',
  ].join('\n');
  await writeFile(path.join(dir, 'pgbouncer.ini'), config);
  await writeFile(path.join(dir, 'users.txt'), `"${server.user}" ""\n`);
  if (owner) {
    await chmod(dir, 0o755);
    for (const file of ['', 'pgbouncer.ini', 'users.txt']) await chown(path.join(dir, file), owner.uid, owner.gid);
  }
  let output = '';
  const child = spawn(binary, [path.join(dir, 'pgbouncer.ini')], { ...(owner ?? {}), stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const logFile = path.join(dir, 'pgbouncer.log');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilListening(port, child, async () => output + (await readFile(logFile, 'utf8').catch(() => '')));
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, stop };
}
