import net from 'node:net';
import { Worker } from 'node:worker_threads';

/**
 * A TCP proxy that holds every chunk for a fixed time in each direction: how the bench puts a
 * network between the server and PostgreSQL on one machine (0.5 ms each way makes the 1 ms round
 * trip of a database in the next zone). With no delay it forwards at once, and `onClientData` lets
 * a test read what a client sends.
 *
 * Node's timers tick in whole milliseconds, so they cannot wait 0.5 ms. A worker thread sleeps
 * on Atomics.wait (which takes fractions of a millisecond) until the oldest chunk is due and then
 * wakes the proxy with a message; it sleeps in the kernel, so it costs no CPU while it waits.
 */
export interface DelayProxyOptions {
  target: { host: string; port: number };
  /** Added to every chunk in each direction; 0 forwards at once. */
  delayMs: number;
  /** Sees each chunk a client sends, in order, before it is forwarded. */
  onClientData?: (connection: number, chunk: Buffer) => void;
  host?: string;
}

export interface DelayProxy {
  port: number;
  close(): Promise<void>;
}

interface Pending {
  dueAt: number;
  to: net.Socket;
  /** null: the sender ended; end the other side once everything before it is delivered. */
  chunk: Buffer | null;
}

/** Wall-clock milliseconds with sub-millisecond precision, comparable across threads. */
const clock = () => performance.timeOrigin + performance.now();

// The worker: wait until armed, sleep until the due time, disarm, tell the proxy. Plain JS so
// that it runs however the parent was started (tsx, vitest).
const SLEEPER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const armed = new Int32Array(workerData.armed);
const dueAt = new Float64Array(workerData.dueAt);
const nap = new Int32Array(new SharedArrayBuffer(4));
const now = () => performance.timeOrigin + performance.now();
for (;;) {
  Atomics.wait(armed, 0, 0);
  const wait = dueAt[0] - now();
  if (wait > 0) Atomics.wait(nap, 0, 0, wait);
  Atomics.store(armed, 0, 0);
  parentPort.postMessage(0);
}`;

/** One alarm at a time, precise to well under a millisecond: `arm(at)` calls `onAlarm` at `at`. */
class SubMillisecondAlarm {
  private readonly armed = new Int32Array(new SharedArrayBuffer(4));
  private readonly dueAt = new Float64Array(new SharedArrayBuffer(8));
  private readonly worker: Worker;
  isArmed = false;

  constructor(onAlarm: () => void) {
    this.worker = new Worker(SLEEPER_SOURCE, { eval: true, workerData: { armed: this.armed.buffer, dueAt: this.dueAt.buffer } });
    this.worker.on('message', () => {
      this.isArmed = false;
      onAlarm();
    });
    this.worker.unref();
  }

  arm(at: number) {
    this.isArmed = true;
    this.dueAt[0] = at;
    Atomics.store(this.armed, 0, 1);
    Atomics.notify(this.armed, 0);
  }

  stop() {
    return this.worker.terminate();
  }
}

export async function startDelayProxy(options: DelayProxyOptions): Promise<DelayProxy> {
  // Every chunk waits the same time, so arrival order is due order: one queue for all sockets.
  const queue: Pending[] = [];
  const deliverDue = () => {
    const now = clock();
    while (queue.length > 0 && queue[0]!.dueAt <= now) {
      const { to, chunk } = queue.shift()!;
      if (to.destroyed) continue;
      if (chunk === null) to.end();
      else to.write(chunk);
    }
    if (queue.length > 0) alarm?.arm(queue[0]!.dueAt);
  };
  const alarm = options.delayMs > 0 ? new SubMillisecondAlarm(deliverDue) : null;
  const send = (to: net.Socket, chunk: Buffer | null) => {
    if (alarm === null) {
      if (chunk === null) to.end();
      else to.write(chunk);
      return;
    }
    queue.push({ dueAt: clock() + options.delayMs, to, chunk });
    if (!alarm.isArmed) alarm.arm(queue[0]!.dueAt);
  };

  const sockets = new Set<net.Socket>();
  let connections = 0;
  // Half-open both ways, so that a close travels as late as any byte: a side that ends its writing
  // (a client's Terminate and FIN) sees the other end only when the other end has closed.
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const connection = connections++;
    const upstream = net.connect({ ...options.target, allowHalfOpen: true });
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk: Buffer) => {
      options.onClientData?.(connection, chunk);
      send(upstream, chunk);
    });
    upstream.on('data', (chunk: Buffer) => send(client, chunk));
    client.on('end', () => send(upstream, null));
    upstream.on('end', () => send(client, null));
    // A reset on one side ends the other at once: the database or the app sees a dropped connection.
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, options.host ?? '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await alarm?.stop();
    },
  };
}

/** The same database URL, reached through the proxy on `port`. */
export function throughProxy(databaseUrl: string, port: number, host = '127.0.0.1'): string {
  const url = new URL(databaseUrl);
  url.hostname = host;
  url.port = String(port);
  return url.toString();
}

const USAGE = 'usage: tsx test/load/delay-proxy.ts --target HOST:PORT --delay-ms MS';

/** As its own process (the bench), so that the load generator's busy event loop cannot delay deliveries. */
async function main() {
  const argv = process.argv.slice(2);
  const value = (flag: string) => argv[argv.indexOf(flag) + 1];
  const [host, port] = (value('--target') ?? '').split(':');
  const delayMs = Number(value('--delay-ms'));
  if (!host || !Number(port) || !(delayMs >= 0)) {
    console.error(USAGE);
    process.exit(2);
  }
  const proxy = await startDelayProxy({ target: { host, port: Number(port) }, delayMs });
  console.log(`delay proxy listening on ${proxy.port}`);
  process.once('SIGTERM', () => void proxy.close().then(() => process.exit(0)));
}

if (process.argv[1]?.endsWith('delay-proxy.ts')) void main();
