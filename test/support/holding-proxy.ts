import net from 'node:net';

/**
 * A TCP proxy to PostgreSQL that forwards everything, and can hold the answer to the next
 * connection's `target_session_attrs` check (`show transaction_read_only`) for as long as a test
 * needs: the moment of a switchover's race, made to last.
 */
export interface HoldingProxy {
  port: number;
  /** The next connection that asks `show transaction_read_only` gets its answer only at release(). */
  holdNextTargetCheck(): void;
  /** Resolves once a connection's answer is held. */
  holding(): Promise<void>;
  /** Delivers the held answer; resolves once that connection is closed (its client gave up on it). */
  release(): Promise<void>;
  /** Closes the connection whose answer is held instead, as a node that shuts down closes it. */
  drop(): void;
  close(): Promise<void>;
}

export async function startHoldingProxy(port: number): Promise<HoldingProxy> {
  let armed = false;
  let held: { client: net.Socket; release: () => void } | null = null;
  let onHolding: (() => void) | null = null;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    sockets.add(client).add(upstream);
    const withheld: Buffer[] = [];
    let holding = false;
    client.on('data', (chunk: Buffer) => {
      if (armed && chunk.includes('show transaction_read_only')) {
        armed = false;
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
  return {
    port: (server.address() as net.AddressInfo).port,
    holdNextTargetCheck: () => (armed = true),
    holding: () => (held ? Promise.resolve() : new Promise<void>((resolve) => (onHolding = resolve))),
    async release() {
      const { client, release } = held!;
      held = null;
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      release();
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
