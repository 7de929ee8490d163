import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import compression from 'compression';
import type { ServerConfig } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import { MAX_REQUEST_HEADERS } from './node-request.js';

export interface NodeHandler {
  handleNode(req: IncomingMessage, res: ServerResponse): void;
  /** What the handler's /ready reads; the server sets it when it begins to drain. */
  drain?: DrainState;
  /** Whether the body a request declares is one the handler would read; without it, every body is. */
  acceptsBody?(req: IncomingMessage): boolean;
}

/**
 * Whether this process is draining: every response closes its connection, so no client reuses a
 * socket that is about to go; and, when the whole server stops, /ready fails, so a load balancer
 * stops sending. An HTTP process of the cluster that is replaced drains while the server as a
 * whole stays ready: its /ready, should a health check still reach it, says 200.
 */
export class DrainState {
  #closing = false;
  #draining = false;
  /** Every response from now on carries `Connection: close`. */
  get closing(): boolean {
    return this.#closing;
  }
  /** The server stops: /ready answers 503. */
  get draining(): boolean {
    return this.#draining;
  }
  begin(options: { failReady: boolean }): void {
    this.#closing = true;
    if (options.failReady) this.#draining = true;
  }
}

interface DrainOptions {
  /**
   * How long to go on accepting once /ready fails: a load balancer's time to see it and stop
   * sending (SHUTDOWN_GRACE_MS). 0 when nothing routes by /ready (an HTTP process the cluster's
   * primary has already replaced).
   */
  graceMs: number;
  /**
   * Once the listener is closed, how long requests in flight (and, for a replaced process, idle
   * keep-alive connections) get to end by themselves (HTTP_DRAIN_TIMEOUT_MS); whatever is still
   * open then is closed.
   */
  timeoutMs: number;
  /** Whether /ready fails (default true); false for one HTTP process of the cluster replaced while the others serve. */
  failReady?: boolean;
}

interface DrainReport {
  /** Connections still open when the drain's time ran out, closed by force. */
  forced: number;
}

export interface RunningServer {
  server: Server;
  port: number;
  /**
   * Stops without a dropped request: fails /ready and answers every response with `Connection:
   * close` from now on, keeps accepting for `graceMs`, then stops accepting and waits (up to
   * `timeoutMs`) for every connection to end. A connection in use ends after its answer. When the
   * whole server stops (`failReady`), idle keep-alive connections are closed once the listener is,
   * and each one that turns idle after, so the drain ends with the last answer; a replaced process
   * leaves them to their clients (or their keep-alive time), which may still be sending on them.
   */
  drain(options: DrainOptions): Promise<DrainReport>;
  /** Stops accepting and closes idle sockets at once, lets requests in flight finish (up to `graceMs`), then closes every socket. */
  close(graceMs?: number): Promise<void>;
}

/**
 * HTTP_REQUEST_TIMEOUT_MS: the whole request, headers and body, must arrive within it (a slow
 * body would hold a socket for Node's default 300 s). HTTP_MAX_CONNECTIONS: open sockets; Node
 * closes the ones beyond it at once. HTTP_KEEP_ALIVE_TIMEOUT_MS: how long an idle connection
 * stays open for its next request.
 */
export type HttpLimits = Pick<ServerConfig, 'requestTimeoutMs' | 'maxConnections' | 'keepAliveTimeoutMs'>;

/** How often Node checks sockets against requestTimeout; its default of 30 s would let a timeout run 30 s late. */
const TIMEOUT_CHECK_MS = 1_000;

/** An Accept-Encoding that names an encoding the compressor speaks. */
const ACCEPTS_ENCODING = /\b(gzip|br|deflate)\b/i;

/** Smaller bodies gain less from compression than a compressor costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

/**
 * gzip or brotli for every response the client accepts it for (GraphQL results, /metrics, ...),
 * at the socket, so the fast path to Yoga and the Fetch path are both covered. A response that
 * is already encoded (the cached GraphiQL page) passes through.
 */
const compress = compression({ threshold: COMPRESSION_THRESHOLD_BYTES }) as unknown as (
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

export async function listen(app: NodeHandler, port: number, log: Logger, host: string, limits: HttpLimits): Promise<RunningServer> {
  const connections = new Connections(app.drain ?? new DrainState());
  const server = createHttpServer(app, log, limits, connections);
  await listenOn(server, port, host);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    drain: (options) => drainServer(server, connections, log, options),
    close: (graceMs = 10_000) => closeServer(server, graceMs),
  };
}

/**
 * The server's connections as a drain sees them. Those that have carried a request, and those
 * answering one now: a used one that is not busy is an idle keep-alive connection. One never used
 * may have its first request on the way.
 */
class Connections {
  readonly open = new Set<Socket>();
  private readonly used = new WeakSet<Socket>();
  private readonly busy = new Set<Socket>();
  /** Responses not yet begun: a drain that starts while they run must still close their connections. */
  private readonly unanswered = new Set<ServerResponse>();
  /** Whether each connection that turns idle is closed (the whole server drains). */
  private closingIdle = false;

  constructor(private readonly drainState: DrainState) {}

  accepted(socket: Socket): void {
    this.open.add(socket);
    socket.once('close', () => {
      this.open.delete(socket);
      this.busy.delete(socket);
    });
  }

  /** A request begins: its connection is busy until its response closes. */
  requestBegins(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket;
    this.used.add(socket);
    this.busy.add(socket);
    res.once('close', () => {
      this.busy.delete(socket);
      // A response under way when the drain began was sent keep-alive: its connection turns idle now.
      if (this.closingIdle) this.closeIfIdle([socket]);
    });
    if (this.drainState.closing) res.setHeader('connection', 'close');
    else {
      this.unanswered.add(res);
      res.once('close', () => this.unanswered.delete(res));
    }
  }

  /** The drain begins: every response from now on closes its connection, those already under way but not yet begun included. */
  drainBegins(failReady: boolean): void {
    this.drainState.begin({ failReady });
    for (const res of this.unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
    this.unanswered.clear();
  }

  /** Closes the idle keep-alive connections, and from now on each one that turns idle. */
  closeIdle(): void {
    this.closingIdle = true;
    this.closeIfIdle([...this.open]);
  }

  /**
   * Closes those of `candidates` that are idle keep-alive connections, after one turn of the
   * event loop's I/O: a request whose bytes have already arrived is read (and its connection
   * busy) first, so only a client that sends in the very instant of the close meets it.
   */
  private closeIfIdle(candidates: Iterable<Socket>): void {
    setImmediate(() =>
      setImmediate(() => {
        for (const socket of candidates) if (this.used.has(socket) && !this.busy.has(socket)) socket.destroy();
      }),
    );
  }
}

/** The HTTP server under its limits, its connections watched for the drain. */
function createHttpServer(app: NodeHandler, log: Logger, limits: HttpLimits, connections: Connections): Server {
  const server = createServer(
    {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_MS,
    },
    (req, res) => {
      connections.requestBegins(req, res);
      answerRequest(app, log, req, res);
    },
  );
  server.on('connection', (socket: Socket) => connections.accepted(socket));
  // The handler refuses a request that reaches the cut; Node's default keeps as many, but say it.
  server.maxHeadersCount = MAX_REQUEST_HEADERS;
  // A body the handler would refuse (over MAX_BODY_BYTES) is answered 413 before the client is
  // told to send it; Node's default answers 100 Continue to every Expect: 100-continue.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (app.acceptsBody?.(req) ?? true) res.writeContinue();
    server.emit('request', req, res);
  });
  // Longer than the idle timeout of any proxy in front (docs/operations.md, "Keep-alive"), so the
  // proxy, never this server, closes an idle connection: a close from this side can cross a request
  // the proxy is just sending on it. Node announces it (Keep-Alive: timeout=N), closes 1 s after
  // it, and times headers only once a request has begun, so the idle wait never meets
  // HTTP_REQUEST_TIMEOUT_MS.
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  return server;
}

/** The handler's answer; one that throws is a 500 of its own. */
function answerRequest(app: NodeHandler, log: Logger, req: IncomingMessage, res: ServerResponse): void {
  const handle = () => {
    try {
      app.handleNode(req, res);
    } catch (error) {
      log.error({ err: error }, 'could not answer the request');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"message":"Internal server error"}');
    }
  };
  // The compressor wraps every write of the response; a client that accepts no encoding
  // (most API clients and load generators) is spared that cost.
  if (ACCEPTS_ENCODING.test(req.headers['accept-encoding'] ?? '')) compress(req, res, handle);
  else handle();
}

function listenOn(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(`Port ${port} is already in use: stop the other server or set PORT to another port`)
          : error,
      ),
    );
    server.listen(port, host, () => resolve());
  });
}

const openConnections = (server: Server) => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count ?? 0)));

/** RunningServer.drain. */
async function drainServer(server: Server, connections: Connections, log: Logger, options: DrainOptions): Promise<DrainReport> {
  const { graceMs, timeoutMs, failReady = true } = options;
  connections.drainBegins(failReady);
  if (graceMs > 0) {
    log.info({ graceMs }, 'draining: /ready answers 503 and every answer closes its connection; still accepting for SHUTDOWN_GRACE_MS');
    await sleep(graceMs);
  }
  // net.Server's close, not http.Server's: that one would also close connections whose first
  // request is still on its way in (Node counts them idle until a request begins).
  const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  // The whole server stops: nothing routes here any more (the grace period was for that), so
  // an idle keep-alive connection will carry no request, and would hold the drain to its
  // timeout. A process replaced while the others serve keeps them: its clients may still send
  // on them, and each answer closes its connection.
  if (failReady) connections.closeIdle();
  log.info({ connections: await openConnections(server) }, 'stopped accepting; waiting for requests in flight and idle connections to end');
  return endWithin(server, closed, timeoutMs, log);
}

/** Waits up to `timeoutMs` for `closed` (every connection ended), then closes what is still open. */
async function endWithin(server: Server, closed: Promise<void>, timeoutMs: number, log: Logger): Promise<DrainReport> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  const outcome = await Promise.race([closed.then(() => 'ended' as const), timedOut]);
  clearTimeout(timer);
  if (outcome === 'ended') return { forced: 0 };
  const forced = await openConnections(server);
  log.warn({ connections: forced, timeoutMs }, 'connections still open after HTTP_DRAIN_TIMEOUT_MS; closing them');
  server.closeAllConnections();
  await closed;
  return { forced };
}

/** RunningServer.close. */
function closeServer(server: Server, graceMs: number): Promise<void> {
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
}
