import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

// A Node request as the handlers read it: its URL checked once per Host, its body as text or as a
// Fetch Request's stream, and a signal for a client that leaves before its answer.

/**
 * Request headers Node keeps (server.maxHeadersCount); it drops the ones past it without a word,
 * so the handler refuses a request that reaches it (431) before reading any.
 */
export const MAX_REQUEST_HEADERS = 1_000;

/** The URL of a Node request, from its target and Host, as every path builds it. */
export const requestUrlOf = (req: IncomingMessage) => `http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`;

/** Hosts a server remembers the verdict of; the memory is cleared when full, so made-up Hosts cost only their parse. */
const HOSTS_REMEMBERED = 1_024;

/**
 * A Host that is all authority (no character that would end it, or begin credentials, inside it)
 * and no longer than a DNS name with a port: only such Hosts are remembered.
 */
const PLAIN_HOST = /^[^/\\?#@]{1,260}$/;

/**
 * Whether the URL every Node path builds from the request line and Host parses, remembered by
 * Host. The URL parser never fails on a path, query or fragment, so for an origin-form target
 * (`/…`, every request but a proxy's) after a plain Host the verdict is the Host's alone. Other
 * targets, and Hosts that are empty or hold a `/`, `\`, `?`, `#` or `@`, are parsed every time.
 */
export function requestUrlCheck(): (req: IncomingMessage) => boolean {
  const verdicts = new Map<string, boolean>();
  return (req) => {
    const host = req.headers.host ?? 'localhost';
    if (req.url?.startsWith('/') !== true || !PLAIN_HOST.test(host)) return URL.canParse(requestUrlOf(req));
    let parses = verdicts.get(host);
    if (parses === undefined) {
      parses = URL.canParse(`http://${host}/`);
      if (verdicts.size >= HOSTS_REMEMBERED) verdicts.clear();
      verdicts.set(host, parses);
    }
    return parses;
  };
}

/**
 * A signal that aborts when the client leaves before its response has gone out. Nothing is built
 * for the requests that are answered (an aborted signal makes a DOMException with a stack).
 */
export function clientLeftSignal(res: ServerResponse): AbortSignal {
  const clientLeft = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) clientLeft.abort();
  });
  return clientLeft.signal;
}

/** A Node request as a Fetch Request, its body streaming through; its signal aborts when the client leaves. */
export function toFetchRequest(req: IncomingMessage, res: ServerResponse): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(requestUrlOf(req), {
    method: req.method ?? 'GET',
    headers,
    signal: clientLeftSignal(res),
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
  } as RequestInit);
}

/** The whole body as text. Only for a request whose Content-Length was checked: Node's parser stops there. */
export function readDeclaredBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    // A client that leaves mid-body ends the request with 'aborted' and 'close' but no 'end'.
    req.once('close', () => {
      if (!req.complete) reject(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    });
    req.once('error', reject);
  });
}
