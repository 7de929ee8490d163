import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { css, editorWorkerService, favicon, graphqlWorker, js, jsonWorker } from '@graphql-yoga/render-graphiql/graphiql';
import { shouldRenderGraphiQL, type GraphiQLOptions } from 'graphql-yoga';
import Negotiator from 'negotiator';

/**
 * GraphiQL: about 9 MB of code (no CDN may be reachable), served from this process as a small page
 * and a few large files.
 *
 * - The page lives at its own path. A browser drops its cached copy of a URL after any successful
 *   POST to that URL (RFC 9111, 4.4), and GraphiQL POSTs every query to /graphql: served there,
 *   the page could never be reused. A browser's GET /graphql is redirected here.
 * - The page is a few kilobytes; its script, style sheet, fonts, editor workers and icon are
 *   separate files named by a hash of their content, cached for a year without revalidation
 *   (`immutable`). GraphiQL writes the edited query into the page's URL (/graphiql?query=…), and a
 *   browser keeps one cache entry per URL: each new query string downloads the page again, but
 *   never its code (1.85 MB with brotli).
 * - Compressed per visit the code would cost a second of CPU each time (brotli at a ratio that
 *   brings it under 2 MB), so each file is compressed once per encoding and kept.
 * - The page has an ETag with `no-cache`: a reload of the same URL is a bodiless 304, and a
 *   restart with another configuration (other headers, another build) is seen at once.
 */
const GRAPHIQL_PATH = '/graphiql';
const ASSETS_PATH = `${GRAPHIQL_PATH}/assets/`;

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

type Encoding = 'br' | 'gzip' | 'identity';

const ENCODERS: Record<Encoding, (body: Buffer) => Promise<Buffer>> = {
  // Quality 9 with a 16 MB window: within 8% of quality 11 for a tenth of the CPU.
  br: (body) =>
    brotli(body, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 9,
        [zlib.constants.BROTLI_PARAM_LGWIN]: 24,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
      },
    }),
  gzip: (body) => gzip(body, { level: 9 }),
  identity: async (body) => body,
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

const contentHash = (body: Buffer) => createHash('sha256').update(body).digest('base64url').slice(0, 27);

/** Formats that are compressed already: brotli would only cost CPU. */
const COMPRESSED_TYPES = new Set(['font/woff2', 'font/woff', 'image/png']);

/** One file, in every encoding on first demand. */
class Served {
  readonly etag: string;
  private readonly bodies = new Map<Encoding, Promise<Buffer>>();
  private readonly compressible: boolean;

  constructor(
    private readonly identity: Buffer,
    readonly contentType: string,
  ) {
    this.etag = `"${contentHash(identity)}"`;
    this.compressible = !COMPRESSED_TYPES.has(contentType);
  }

  body(encoding: Encoding): Promise<Buffer> {
    let body = this.bodies.get(encoding);
    if (!body) {
      body = ENCODERS[encoding](this.identity);
      this.bodies.set(encoding, body);
    }
    return body;
  }

  async respond(request: Request, cacheControl: string): Promise<Response> {
    const headers = new Headers({
      'content-type': this.contentType,
      etag: this.etag,
      'cache-control': cacheControl,
    });
    if (this.compressible) headers.set('vary', 'Accept-Encoding');
    if (
      request.headers
        .get('if-none-match')
        ?.split(/\s*,\s*/)
        .includes(this.etag)
    ) {
      return new Response(null, { status: 304, headers });
    }
    const encoding = this.compressible ? smallestAccepted(request) : 'identity';
    if (encoding !== 'identity') headers.set('content-encoding', encoding);
    const body = await this.body(encoding);
    return new Response(new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength), { headers });
  }
}

type AssetName = 'script' | 'style' | 'icon' | 'editorWorker' | 'jsonWorker' | 'graphqlWorker';

interface Assets {
  /** URL path of each asset, for the page. */
  urls: Record<AssetName, string>;
  byPath: Map<string, Served>;
}

const EXTENSIONS: Record<string, string> = {
  'font/ttf': 'ttf',
  'font/woff': 'woff',
  'font/woff2': 'woff2',
  'image/png': 'png',
  'image/svg+xml': 'svg',
};

/** Inlined files this large or larger become files of their own; smaller ones cost less inline than a request. */
const INLINE_MAX_BYTES = 4_096;

/** A base64 `url(data:…)` in a style sheet. */
const DATA_URL = /url\((['"]?)data:([a-z0-9.+/-]+);base64,([A-Za-z0-9+/=]+)\1\)/g;

/**
 * The style sheet with its inlined fonts as files of their own: 575 KB of base64 that every first
 * visit downloaded in full, where a browser fetches only the fonts a page uses.
 */
function extractInlinedFiles(css: string, add: (file: string, served: Served) => string): string {
  return css.replace(DATA_URL, (whole, _quote: string, type: string, base64: string) => {
    const extension = EXTENSIONS[type];
    if (!extension || base64.length < INLINE_MAX_BYTES) return whole;
    return `url(${add(`${type.startsWith('font/') ? 'font' : 'image'}.${extension}`, new Served(Buffer.from(base64, 'base64'), type))})`;
  });
}

const JAVASCRIPT = 'text/javascript; charset=utf-8';

/** Icon images this large or smaller: a tab shows 16 or 32 pixels (48 on some systems). */
const ICON_MAX_PIXELS = 48;

/**
 * The images of an ICO file up to ICON_MAX_PIXELS wide: Yoga's icon also holds 64 to 256 pixel
 * images, 113 KB where a tab needs 15. Anything that does not read as an ICO is kept as it is.
 */
function smallIconImages(ico: Buffer): Buffer {
  const HEADER = 6;
  const ENTRY = 16;
  if (ico.length < HEADER || ico.readUInt16LE(0) !== 0 || ico.readUInt16LE(2) !== 1) return ico;
  const entries = Array.from({ length: ico.readUInt16LE(4) }, (_, i) => ico.subarray(HEADER + i * ENTRY, HEADER + (i + 1) * ENTRY));
  const kept = entries.filter((entry) => entry[0]! !== 0 && entry[0]! <= ICON_MAX_PIXELS);
  if (kept.length === 0 || kept.length === entries.length) return ico;
  const images = kept.map((entry) => ico.subarray(entry.readUInt32LE(12), entry.readUInt32LE(12) + entry.readUInt32LE(8)));
  const header = Buffer.alloc(HEADER);
  header.writeUInt16LE(1, 2);
  header.writeUInt16LE(kept.length, 4);
  let offset = HEADER + kept.length * ENTRY;
  const directory = kept.map((entry, i) => {
    const copy = Buffer.from(entry);
    copy.writeUInt32LE(offset, 12);
    offset += images[i]!.length;
    return copy;
  });
  return Buffer.concat([header, ...directory, ...images]);
}

/** GraphiQL's files from @graphql-yoga/render-graphiql, each at a path named by its content. */
function buildAssets(): Assets {
  const byPath = new Map<string, Served>();
  /** Serves `served` as `name.<hash>.ext`; the same content twice is one file. */
  const add = (file: string, served: Served) => {
    const dot = file.indexOf('.');
    const url = `${ASSETS_PATH}${file.slice(0, dot)}.${served.etag.slice(1, 13)}${file.slice(dot)}`;
    byPath.set(url, served);
    return url;
  };
  const iconData = /^data:([^;]+);base64,(.*)$/s.exec(favicon);
  const icon = new Served(smallIconImages(Buffer.from(iconData?.[2] ?? '', 'base64')), iconData?.[1] ?? 'image/x-icon');
  const urls: Record<AssetName, string> = {
    script: add('graphiql.js', new Served(Buffer.from(js), JAVASCRIPT)),
    style: add('graphiql.css', new Served(Buffer.from(extractInlinedFiles(css, add)), 'text/css; charset=utf-8')),
    icon: add('favicon.ico', icon),
    editorWorker: add('editor.worker.js', new Served(Buffer.from(editorWorkerService), JAVASCRIPT)),
    jsonWorker: add('json.worker.js', new Served(Buffer.from(jsonWorker), JAVASCRIPT)),
    graphqlWorker: add('graphql.worker.js', new Served(Buffer.from(graphqlWorker), JAVASCRIPT)),
  };
  return { urls, byPath };
}

/** `JSON.stringify` that a `<script>` element cannot end early (a `</script>` inside a default query). */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page @graphql-yoga/render-graphiql renders, with its code as files instead of inline. */
function renderPage(options: GraphiQLOptions, urls: Assets['urls']): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(options.title ?? 'Yoga GraphiQL')}</title>
    <link rel="icon" href="${urls.icon}" />
    <link rel="stylesheet" href="${urls.style}" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run this app.</noscript>
    <div id="root"></div>
    <script>
      // The editors start several workers of one kind at once: each file is fetched once (from
      // the cache after the first visit) and every worker of its kind starts from that copy.
      const workers = { editorWorkerService: ${scriptJson(urls.editorWorker)}, json: ${scriptJson(urls.jsonWorker)}, graphql: ${scriptJson(urls.graphqlWorker)} };
      const scripts = {};
      const scriptOf = (label) =>
        (scripts[label] ??= fetch(workers[label]).then((response) => response.blob()).then((blob) => URL.createObjectURL(blob)));
      self['MonacoEnvironment'] = {
        globalAPI: false,
        getWorker: async (moduleId, label) => new Worker(await scriptOf(label), { name: label, type: 'module' }),
      };
    </script>
    <script src="${urls.script}"></script>
    <script>
      YogaGraphiQL.renderYogaGraphiQL(window.document.querySelector('#root'), ${scriptJson(options)});
    </script>
  </body>
</html>
`;
}

/** A year: the longest lifetime caches honour. The name changes whenever the content does. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
// Revalidate on every load: a restart with another configuration renders another page.
const REVALIDATE = 'no-cache';

export interface GraphiQLPage {
  /** Whether this path is GraphiQL's: the page or one of its files. */
  serves(pathname: string): boolean;
  /** Answers GET of the page or of a file: the best encoding the client accepts, or a 304. */
  serve(request: Request): Promise<Response>;
  /** Answers a browser's GET /graphql: to the page. */
  redirect(): Response;
}

/**
 * `options` may carry what Yoga's GraphiQL takes beyond its declared options (`variables`: the
 * Variables pane of a first visit).
 */
export function createGraphiQLPage(options: GraphiQLOptions & { variables?: string }): GraphiQLPage {
  // Built on first use: most processes (tests, load runs) never serve it.
  let built: { page: Served; assets: Assets } | null = null;
  const ready = () => {
    if (!built) {
      const assets = buildAssets();
      built = { page: new Served(Buffer.from(renderPage(options, assets.urls)), 'text/html; charset=utf-8'), assets };
    }
    return built;
  };

  return {
    serves: (pathname) => pathname === GRAPHIQL_PATH || pathname.startsWith(ASSETS_PATH),
    async serve(request) {
      const { page, assets } = ready();
      const { pathname } = new URL(request.url);
      if (pathname === GRAPHIQL_PATH) return page.respond(request, REVALIDATE);
      const asset = assets.byPath.get(pathname);
      if (asset) return asset.respond(request, IMMUTABLE);
      // An older page's file: the page names its files anew on every build.
      return new Response(`No GraphiQL file ${pathname}; reload ${GRAPHIQL_PATH}\n`, {
        status: 404,
        headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': REVALIDATE },
      });
    },
    redirect() {
      return new Response(null, { status: 302, headers: { location: GRAPHIQL_PATH } });
    },
  };
}
