import type { AddressInfo, Server } from 'node:net';

/**
 * Every server a test starts listens on port 0 and reports the port it got, so two test files
 * never race for one. Programs that cannot listen on port 0 (PostgreSQL, PgBouncer, etcd) take a
 * port found unused and start again on another when it was taken first (src/dev/loopback-port.ts).
 */

/**
 * A port where nothing listens, for a client's "connection refused": below 1024, where only root
 * may listen, and outside the kernel's range for port 0 that every server of the suite gets its
 * port from; tcpmux, which no test machine runs.
 */
export const NOTHING_LISTENS = 1;

export interface LoopbackServer {
  port: number;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** Cuts its connections and stops it. */
  close(): Promise<void>;
}

/** Starts a server of the test's own (a webhook receiver, a stub, an echo) on a free port of 127.0.0.1. */
export async function listenOnLoopback(server: Server & { closeAllConnections?: () => void }): Promise<LoopbackServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}
