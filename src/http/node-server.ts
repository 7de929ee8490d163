import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import type { Logger } from '../logger.js';

export type FetchHandler = (request: Request) => Promise<Response>;

function toRequest(req: IncomingMessage, port: number): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const url = `http://${req.headers.host ?? `127.0.0.1:${port}`}${req.url ?? '/'}`;
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(url, {
    method: req.method ?? 'GET',
    headers,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
  } as RequestInit);
}

async function send(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    headers[name] = name === 'set-cookie' ? response.headers.getSetCookie() : value;
  });
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}

export interface RunningServer {
  server: Server;
  port: number;
  /** Stops accepting, lets requests in flight finish (up to `graceMs`), then closes every socket. */
  close(graceMs?: number): Promise<void>;
}

export async function listen(handler: FetchHandler, port: number, log: Logger, host = '0.0.0.0'): Promise<RunningServer> {
  let boundPort = port;
  const server = createServer((req, res) => {
    handler(toRequest(req, boundPort))
      .then((response) => send(response, res))
      .catch((error: unknown) => {
        log.error({ err: error }, 'could not answer the request');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"message":"Internal server error"}');
      });
  });
  // Keep-alive sockets from load generators must not outlive the idle window forever.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  boundPort = (server.address() as AddressInfo).port;
  return {
    server,
    port: boundPort,
    close(graceMs = 10_000) {
      return new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), graceMs);
        // A keep-alive socket turns idle when its last response is sent; close it then, not at its timeout.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        server.close(() => {
          clearTimeout(force);
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      });
    },
  };
}
