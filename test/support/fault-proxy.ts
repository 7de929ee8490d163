import net from 'node:net';

/**
 * A TCP proxy between the server and PostgreSQL that fails the way a network path does, not the
 * way a process does: it stops forwarding bytes without closing any socket. Nothing tells either
 * side that something is wrong; the server only learns it from its own limits.
 *
 * - `blackhole()`: every connection, open or new, stops forwarding (a dropped route, an old
 *   primary whose machine vanished in a failover). A new connection is accepted but never reaches
 *   PostgreSQL, like a SYN that goes unanswered.
 * - `freezeExisting()`: the connections open now stop forwarding; new ones flow (a stateful
 *   firewall or NAT that lost its table, a half-dead load balancer).
 * - `heal()`: everything forwards again; bytes held meanwhile are delivered, as TCP would once a
 *   route is back, and a close that happened meanwhile reaches the other side only now.
 */
export interface FaultProxy {
  port: number;
  /** The same database URL, reached through the proxy. */
  url(databaseUrl: string): string;
  blackhole(): void;
  freezeExisting(): void;
  heal(): void;
  /** Connections open between clients and the proxy. */
  openConnections(): number;
  /** Connections clients have opened to the proxy since it started, closed ones included. */
  acceptedConnections(): number;
  close(): Promise<void>;
}

interface Link {
  client: net.Socket;
  upstream: net.Socket | null;
  frozen: boolean;
  /** A close that arrived while frozen, passed on at heal time. */
  closeOnHeal: (() => void)[];
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const links = new Set<Link>();
  let blackholed = false;
  let accepted = 0;

  const connectUpstream = (link: Link) => {
    const upstream = net.connect(target);
    link.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk: Buffer) => link.client.write(chunk));
    upstream.on('end', () => passOn(link, () => link.client.end()));
    upstream.on('error', () => passOn(link, () => link.client.destroy()));
    upstream.on('close', () => passOn(link, () => link.client.destroy()));
  };

  /** Closes propagate at once on a healthy link, and only at heal time on a frozen one. */
  const passOn = (link: Link, close: () => void) => {
    if (link.frozen) link.closeOnHeal.push(close);
    else close();
  };

  const freeze = (link: Link) => {
    link.frozen = true;
    link.client.pause();
    link.upstream?.pause();
  };

  const thaw = (link: Link) => {
    link.frozen = false;
    if (link.upstream === null && !link.client.destroyed) connectUpstream(link);
    link.client.resume();
    link.upstream?.resume();
    for (const close of link.closeOnHeal.splice(0)) close();
  };

  const server = net.createServer((client) => {
    const link: Link = { client, upstream: null, frozen: false, closeOnHeal: [] };
    links.add(link);
    accepted++;
    client.setNoDelay(true);
    // Bytes a client sends before its upstream exists wait in the socket: it is paused until then.
    client.on('data', (chunk: Buffer) => link.upstream?.write(chunk));
    client.on('end', () => passOn(link, () => link.upstream?.end()));
    client.on('error', () => passOn(link, () => link.upstream?.destroy()));
    client.on('close', () => {
      passOn(link, () => link.upstream?.destroy());
      if (!link.frozen) links.delete(link);
    });
    if (blackholed) freeze(link);
    else connectUpstream(link);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    url(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    blackhole() {
      blackholed = true;
      for (const link of links) freeze(link);
    },
    freezeExisting() {
      for (const link of links) freeze(link);
    },
    heal() {
      blackholed = false;
      for (const link of links) thaw(link);
      for (const link of links) if (link.client.destroyed) links.delete(link);
    },
    openConnections() {
      return [...links].filter((link) => !link.client.destroyed).length;
    },
    acceptedConnections() {
      return accepted;
    },
    async close() {
      for (const link of links) {
        link.client.destroy();
        link.upstream?.destroy();
      }
      links.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
