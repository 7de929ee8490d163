import { createServer, type AddressInfo, type Server } from 'node:net';

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

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
