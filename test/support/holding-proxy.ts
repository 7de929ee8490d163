import net from 'node:net';

/**
 * A TCP proxy to PostgreSQL that forwards everything, and can hold the answers of one connection
 * for as long as a test needs: the answer to the next `target_session_attrs` check (`show
 * transaction_read_only`), the moment of a switchover's race made to last; or every answer to the
 * next connection a pool of a given name opens, a database that is slow to answer one client.
 */
export interface HoldingProxy {
  port: number;
  /** The next connection that asks `show transaction_read_only` gets its answer only at release(). */
  holdNextTargetCheck(): void;
  /** The next connection whose startup message names `application` (application_name) gets no answer until deliver(). */
  holdNextConnectionOf(application: string): void;
  /** Resolves once a connection's answer is held. */
  holding(): Promise<void>;
  /** Delivers what is held, if anything, and forwards that connection's answers from then on. */
  deliver(): void;
  /** Delivers the held answer; resolves once that connection is closed (its client gave up on it). */
  release(): Promise<void>;
  /** Closes the connection whose answer is held instead, as a node that shuts down closes it. */
  drop(): void;
  close(): Promise<void>;
}

/** What a client sends that starts the hold: from it on, that connection's answers wait. */
type Trigger = (chunk: Buffer) => boolean;

const asksTargetCheck: Trigger = (chunk) => chunk.includes('show transaction_read_only');

/** The startup message lists its parameters as name and value, each ending in a zero byte. */
const startsConnectionOf =
  (application: string): Trigger =>
  (chunk) =>
    chunk.includes(`application_name\0${application}\0`);

export async function startHoldingProxy(port: number): Promise<HoldingProxy> {
  let armed: Trigger | null = null;
  let held: { client: net.Socket; release: () => void } | null = null;
  let onHolding: (() => void) | null = null;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    sockets.add(client).add(upstream);
    const withheld: Buffer[] = [];
    let holding = false;
    client.on('data', (chunk: Buffer) => {
      if (armed?.(chunk)) {
        armed = null;
        holding = true;
        held = {
          client,
          release: () => {
            holding = false;
            for (const answer of withheld.splice(0)) client.write(answer);
          },
        };
        onHolding?.();
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => (holding ? withheld.push(chunk) : client.write(chunk)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const deliver = () => {
    const { client, release } = held!;
    held = null;
    release();
    return client;
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    holdNextTargetCheck: () => (armed = asksTargetCheck),
    holdNextConnectionOf: (application) => (armed = startsConnectionOf(application)),
    holding: () => (held ? Promise.resolve() : new Promise<void>((resolve) => (onHolding = resolve))),
    deliver: () => void (held && deliver()),
    async release() {
      const client = held!.client;
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      deliver();
      await closed;
    },
    drop() {
      held!.client.destroy();
      held = null;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
