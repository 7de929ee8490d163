import { createServer } from 'node:net';

/**
 * Ports for programs that cannot listen on port 0 and report the port they got (PostgreSQL,
 * PgBouncer, etcd). A port found unused can be taken by another program before the one it was
 * found for binds it, so a caller never trusts it: it starts the program, and when the program
 * says its port is taken, starts it again on another one.
 */

/** How many ports a start tries before it gives up: a clash is rare, ten in a row is a machine out of ports. */
export const PORT_ATTEMPTS = 10;

/** A TCP port of 127.0.0.1 that nothing listened on a moment ago (the kernel's pick for port 0). */
export function unusedLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts something on an unused port, and again on another while `isClash` says its port was
 * taken first; any other failure, or a clash on every attempt, is thrown.
 *
 * @example const bouncer = await onUnusedPort((port) => startPgBouncer(binary, server, port), isPortTaken);
 */
export async function onUnusedPort<T>(start: (port: number) => Promise<T>, isClash: (error: unknown) => boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await unusedLoopbackPort());
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !isClash(error)) throw error;
    }
  }
}
