import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { shouldRenderGraphiQL, type GraphiQLOptions } from 'graphql-yoga';
import Negotiator from 'negotiator';

/**
 * GraphiQL is one HTML page of about 9 MB: its code is inlined, since no CDN may be reachable.
 *
 * - It lives at its own path. A browser drops its cached copy of a URL after any successful POST
 *   to that URL (RFC 9111, 4.4), and GraphiQL POSTs every query to /graphql: served there, the
 *   page could never be reused. A browser's GET /graphql is redirected here.
 * - Compressed per visit it would cost a second of CPU each time (brotli at a ratio that brings
 *   it under 2 MB), so it is compressed once per encoding and kept.
 * - An ETag with `no-cache` makes a reload a bodiless 304.
 */
export const GRAPHIQL_PATH = '/graphiql';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

type Encoding = 'br' | 'gzip' | 'identity';

const ENCODERS: Record<Encoding, (page: Buffer) => Promise<Buffer>> = {
  // Quality 9 with a 16 MB window: 1.85 MB in about a second; quality 11 saves 8% more for ten times the CPU.
  br: (page) =>
    brotli(page, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 9,
        [zlib.constants.BROTLI_PARAM_LGWIN]: 24,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: page.length,
      },
    }),
  gzip: (page) => gzip(page, { level: 9 }),
  identity: async (page) => page,
};

/** The smallest encoding the client accepts, whatever order it lists them in. */
function smallestAccepted(request: Request): Encoding {
  const acceptEncoding = request.headers.get('accept-encoding') ?? '';
  const accepted = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }).encodings(['br', 'gzip']);
  return accepted.includes('br') ? 'br' : accepted.includes('gzip') ? 'gzip' : 'identity';
}

/** Whether a request to the GraphQL endpoint is a browser asking for a page (Yoga's own rule). */
export function wantsGraphiQLPage(method: string, accept: string | null | undefined): boolean {
  return shouldRenderGraphiQL({ method, headers: new Headers(accept ? { accept } : {}) } as Request);
}

export interface GraphiQLPage {
  /** Answers GET /graphiql: the page in the best encoding the client accepts, or a 304. */
  serve(request: Request): Promise<Response>;
  /** Answers a browser's GET /graphql: to the page. */
  redirect(): Response;
}

export function createGraphiQLPage(options: GraphiQLOptions): GraphiQLPage {
  // Rendered on first use: most processes (tests, load runs) never serve it.
  let page: { etag: string; identity: Buffer; bodies: Map<Encoding, Promise<Buffer>> } | null = null;
  const rendered = () => {
    if (!page) {
      const identity = Buffer.from(renderGraphiQL(options));
      const etag = `"${createHash('sha256').update(identity).digest('base64url').slice(0, 27)}"`;
      page = { etag, identity, bodies: new Map() };
    }
    return page;
  };
  const bodyOf = (encoding: Encoding) => {
    const { bodies, identity } = rendered();
    let body = bodies.get(encoding);
    if (!body) {
      body = ENCODERS[encoding](identity);
      bodies.set(encoding, body);
    }
    return body;
  };

  return {
    async serve(request) {
      const { etag } = rendered();
      const headers = new Headers({
        'content-type': 'text/html; charset=utf-8',
        etag,
        // Revalidate on every load: a restart with another configuration renders another page.
        'cache-control': 'no-cache',
        vary: 'Accept-Encoding',
      });
      if (
        request.headers
          .get('if-none-match')
          ?.split(/\s*,\s*/)
          .includes(etag)
      ) {
        return new Response(null, { status: 304, headers });
      }
      const encoding = smallestAccepted(request);
      if (encoding !== 'identity') headers.set('content-encoding', encoding);
      const body = await bodyOf(encoding);
      return new Response(new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength), { headers });
    },
    redirect() {
      return new Response(null, { status: 302, headers: { location: GRAPHIQL_PATH } });
    },
  };
}
