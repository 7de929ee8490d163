import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { PORT_ATTEMPTS, unusedLoopbackPort } from '../../src/dev/loopback-port.js';
import { spawnRecorded } from './processes.js';

/**
 * A real PostgreSQL HA cluster on loopback, as teams run one on their own machines: one etcd and
 * Patroni nodes (Debian's `patroni`, `etcd-server` and `postgresql-15`), each node a PostgreSQL
 * that Patroni bootstraps, replicates and fails over. Everything runs as the `postgres` user (as
 * root, PostgreSQL refuses to run) in a temporary folder.
 */

const execFileAsync = promisify(execFile);

const PG_BIN_DIR = process.env['PATRONI_PG_BIN_DIR'] ?? '/usr/lib/postgresql/15/bin';
const PATRONI = '/usr/bin/patroni';
const PATRONICTL = '/usr/bin/patronictl';
const ETCD = '/usr/bin/etcd';

export const SUPERUSER_PASSWORD = 'patroni-superuser-password';
const REPLICATION_PASSWORD = 'patroni-replication-password';

/** Why the cluster cannot run here, or null when it can. */
export function patroniMissing(): string | null {
  const missing = [PATRONI, PATRONICTL, ETCD, path.join(PG_BIN_DIR, 'postgres')].filter((file) => !existsSync(file));
  return missing.length ? `missing ${missing.join(', ')} (apt-get install patroni etcd-server postgresql-15)` : null;
}

export interface ClusterSettings {
  nodes: number;
  /** Seconds the leader's key lives without renewal: the longest a dead leader stays leader. */
  ttl: number;
  loopWait: number;
  retryTimeout: number;
  synchronousMode: boolean;
  /**
   * Patroni's failsafe_mode (3.0 and later): while etcd cannot be reached, the leader stays primary
   * as long as every other member answers it over the REST API, instead of demoting itself.
   */
  failsafeMode: boolean;
}

export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  dataDir: string;
  configFile: string;
  process: ChildProcess | null;
}

interface Member {
  name: string;
  role: string;
  state: string;
  port: number;
  lag?: number | string;
  timeline?: number;
}

interface RunAs {
  uid: number;
  gid: number;
}

function postgresUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  };
}

function nodeConfig(node: PatroniNode, scope: string, etcdPort: number, root: string, settings: ClusterSettings): string {
  // JSON is YAML: no YAML writer needed.
  return JSON.stringify(
    {
      scope,
      namespace: '/service/',
      name: node.name,
      log: { level: 'WARNING' },
      restapi: { listen: `127.0.0.1:${node.restPort}`, connect_address: `127.0.0.1:${node.restPort}` },
      etcd: { host: `127.0.0.1:${etcdPort}` },
      bootstrap: {
        dcs: {
          ttl: settings.ttl,
          loop_wait: settings.loopWait,
          retry_timeout: settings.retryTimeout,
          maximum_lag_on_failover: 1_048_576,
          synchronous_mode: settings.synchronousMode,
          failsafe_mode: settings.failsafeMode,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              max_connections: 200,
              wal_log_hints: 'on',
              wal_keep_size: '256MB',
              max_wal_senders: 10,
              max_replication_slots: 10,
              hot_standby: 'on',
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { locale: 'C' }, { 'auth-host': 'scram-sha-256' }, { 'auth-local': 'trust' }],
      },
      postgresql: {
        listen: `127.0.0.1:${node.pgPort}`,
        connect_address: `127.0.0.1:${node.pgPort}`,
        data_dir: node.dataDir,
        bin_dir: PG_BIN_DIR,
        pgpass: path.join(root, node.name, 'pgpass'),
        authentication: {
          superuser: { username: 'postgres', password: SUPERUSER_PASSWORD },
          replication: { username: 'replicator', password: REPLICATION_PASSWORD },
          rewind: { username: 'postgres', password: SUPERUSER_PASSWORD },
        },
        pg_hba: [
          'local all all trust',
          'host replication replicator 127.0.0.1/32 scram-sha-256',
          'host all all 127.0.0.1/32 scram-sha-256',
        ],
        parameters: { unix_socket_directories: path.join(root, node.name), password_encryption: 'scram-sha-256' },
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    },
    null,
    2,
  );
}

export interface PatroniCluster {
  nodes: PatroniNode[];
  settings: ClusterSettings;
  /** The superuser's URL of one node. */
  url(node: PatroniNode, database?: string): string;
  members(): Promise<Member[]>;
  leader(): Promise<PatroniNode>;
  /** Waits until `check` holds for the cluster's members (polled every 200 ms). */
  waitFor(what: string, check: (members: Member[]) => boolean, timeoutMs?: number): Promise<Member[]>;
  /** A leader and every other node a streaming (synchronous, in synchronous mode) standby. */
  waitHealthy(timeoutMs?: number): Promise<PatroniNode>;
  /** SIGKILL of the node's Patroni and its postmaster: a machine that crashed. */
  kill(node: PatroniNode): Promise<void>;
  /** SIGSTOP (or SIGCONT) of the node's Patroni and every PostgreSQL process: a machine that froze or vanished. */
  freeze(node: PatroniNode, frozen: boolean): void;
  start(node: PatroniNode): void;
  switchover(candidate: PatroniNode): Promise<string>;
  setSynchronousMode(on: boolean): Promise<void>;
  /** SIGKILL of etcd: the cluster's DCS gone. */
  killEtcd(): Promise<void>;
  /** etcd again, on its data folder and ports. */
  startEtcd(): void;
  stop(): Promise<void>;
}

/** What etcd, Patroni's REST API or PostgreSQL print when another program took their port first. */
const PORT_CLASH = /address already in use|could not bind/i;

/**
 * etcd, Patroni and PostgreSQL cannot listen on port 0 and report the port they got: the cluster
 * takes ports found unused, and starts again on others when one was taken first.
 */
export async function startPatroniCluster(settings: ClusterSettings): Promise<PatroniCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnUnusedPorts({ ...settings });
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !PORT_CLASH.test(String(error))) throw error;
    }
  }
}

async function startClusterOnUnusedPorts(settings: ClusterSettings): Promise<PatroniCluster> {
  const runAs = postgresUser();
  const root = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-patroni-'));
  await chmod(root, 0o755);
  const own = async (file: string) => {
    if (runAs) await chown(file, runAs.uid, runAs.gid);
  };
  await own(root);
  const children = new Set<ChildProcess>();
  const output: string[] = [];
  const launch = (command: string, args: string[], label: string) => {
    const child = spawnRecorded(command, args, {
      ...(runAs ?? {}),
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C.UTF-8' },
    });
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) output.push(`${label}: ${line}`);
      if (output.length > 400) output.splice(0, output.length - 400);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  };

  const etcdClient = await unusedLoopbackPort();
  const etcdPeer = await unusedLoopbackPort();
  const etcdDir = path.join(root, 'etcd');
  await mkdir(etcdDir, { mode: 0o700 });
  await own(etcdDir);
  let etcd: ChildProcess | null = null;
  const startEtcd = () => {
    etcd = launch(
      ETCD,
      [
        '--name=etcd0',
        `--data-dir=${etcdDir}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=etcd0=http://127.0.0.1:${etcdPeer}`,
        '--enable-v2=true',
        '--log-level=error',
      ],
      'etcd',
    );
  };
  startEtcd();
  const scope = `mb-${process.pid}-${Date.now().toString(36)}`;
  const nodes: PatroniNode[] = [];
  for (let i = 0; i < settings.nodes; i++) {
    const name = `node${i + 1}`;
    const dir = path.join(root, name);
    await mkdir(dir, { mode: 0o700 });
    await own(dir);
    const node: PatroniNode = {
      name,
      pgPort: await unusedLoopbackPort(),
      restPort: await unusedLoopbackPort(),
      dataDir: path.join(dir, 'data'),
      configFile: path.join(dir, 'patroni.yml'),
      process: null,
    };
    await writeFile(node.configFile, nodeConfig(node, scope, etcdClient, root, settings));
    await own(node.configFile);
    nodes.push(node);
  }

  const rest = async (node: PatroniNode, pathname: string, init?: RequestInit) =>
    fetch(`http://127.0.0.1:${node.restPort}${pathname}`, { ...init, signal: AbortSignal.timeout(2_000) });

  const start = (node: PatroniNode) => {
    node.process = launch(PATRONI, [node.configFile], node.name);
  };

  const members = async (): Promise<Member[]> => {
    for (const node of nodes) {
      try {
        const response = await rest(node, '/cluster');
        if (response.ok) return ((await response.json()) as { members: Member[] }).members;
      } catch {
        // this node's REST API is down: ask the next
      }
    }
    return [];
  };

  const waitFor = async (what: string, check: (members: Member[]) => boolean, timeoutMs = 90_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = await members();
      if (check(now)) return now;
      if (Date.now() > deadline)
        throw new Error(`Patroni cluster: timed out waiting for ${what}: ${JSON.stringify(now)}\n${output.slice(-80).join('\n')}`);
      await sleep(200);
    }
  };

  const byName = (name: string) => nodes.find((node) => node.name === name)!;

  const postgresPids = async (node: PatroniNode): Promise<number[]> => {
    try {
      const postmaster = Number((await readFile(path.join(node.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(postmaster)])
        .toString()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      return [postmaster, ...children];
    } catch {
      return [];
    }
  };

  const cluster: PatroniCluster = {
    nodes,
    settings,
    url: (node, database = 'postgres') => `postgres://postgres:${SUPERUSER_PASSWORD}@127.0.0.1:${node.pgPort}/${database}`,
    members,
    async leader() {
      const found = await waitFor('a leader', (m) => m.some((member) => member.role === 'leader' && member.state === 'running'));
      return byName(found.find((member) => member.role === 'leader')!.name);
    },
    waitFor,
    async waitHealthy(timeoutMs) {
      const standby = settings.synchronousMode ? 'sync_standby' : 'replica';
      const found = await waitFor(
        `a leader and ${nodes.length - 1} streaming ${standby}`,
        (m) =>
          m.length === nodes.length &&
          m.filter((member) => member.role === 'leader' && member.state === 'running').length === 1 &&
          // Patroni before 3.0.4 calls a streaming standby "running".
          m.filter((member) => member.role === standby && ['streaming', 'running'].includes(member.state)).length === nodes.length - 1,
        timeoutMs,
      );
      return byName(found.find((member) => member.role === 'leader')!.name);
    },
    async kill(node) {
      const pids = await postgresPids(node);
      node.process?.kill('SIGKILL');
      for (const pid of pids.slice(0, 1)) signalIfAlive(pid, 'SIGKILL');
      if (node.process && node.process.exitCode === null) await new Promise((resolve) => node.process!.once('exit', resolve));
      node.process = null;
      // The backends notice their postmaster's death and exit; wait so that the port is free for the next start.
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(100)) {
        if ((await Promise.all(pids.map((pid) => alive(pid)))).every((up) => !up)) break;
      }
    },
    freeze(node, frozen) {
      const signal = frozen ? 'SIGSTOP' : 'SIGCONT';
      node.process?.kill(signal);
      void postgresPids(node).then((pids) => pids.forEach((pid) => signalIfAlive(pid, signal)));
    },
    start,
    async switchover(candidate) {
      const leader = await cluster.leader();
      // Not execFileSync: the test's own probes and samplers keep running while patronictl waits.
      const { stdout } = await execFileAsync(
        PATRONICTL,
        ['-c', leader.configFile, 'switchover', '--leader', leader.name, '--candidate', candidate.name, '--force'],
        { ...(runAs ?? {}), cwd: root, env: { ...process.env, LC_ALL: 'C.UTF-8' } },
      );
      return stdout;
    },
    async setSynchronousMode(on) {
      const leader = await cluster.leader();
      const response = await rest(leader, '/config', { method: 'PATCH', body: JSON.stringify({ synchronous_mode: on }) });
      if (!response.ok) throw new Error(`PATCH /config answered ${response.status}: ${await response.text()}`);
      settings.synchronousMode = on;
      await cluster.waitHealthy();
    },
    async killEtcd() {
      const running = etcd;
      etcd = null;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
    startEtcd,
    async stop() {
      for (const node of nodes) {
        cluster.freeze(node, false);
        node.process?.kill('SIGTERM');
      }
      const deadline = Date.now() + 20_000;
      while (
        [...children].some((child) => child !== undefined && child.exitCode === null && child.signalCode === null) &&
        Date.now() < deadline
      ) {
        if (nodes.every((node) => node.process === null || node.process.exitCode !== null)) {
          for (const child of children) child.kill('SIGTERM');
        }
        await sleep(100);
      }
      for (const node of nodes) for (const pid of await postgresPids(node)) signalIfAlive(pid, 'SIGKILL');
      for (const child of children) child.kill('SIGKILL');
      await rm(root, { recursive: true, force: true });
    },
  };

  for (const node of nodes) start(node);
  try {
    await cluster.waitHealthy(120_000);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** A process listed a moment ago may have exited since (a backend that saw its postmaster die): not an error. */
function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
