import { request as httpRequest } from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPRESSION_THRESHOLD_BYTES } from '../src/http/node-server.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The bytes on the wire, not decoded. */
  body: Buffer;
}

/** One request over a real socket, keeping the body as sent (fetch would decode it). */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const TWO_MB = 2_000_000;
const PAGE = { accept: 'text/html' };

describe('compression over HTTP', () => {
  let backend: ServedBackend;

  beforeAll(async () => {
    backend = await serveTestBackend();
  });
  afterAll(() => backend?.close());

  it('a browser asking /graphql for a page is sent to GraphiQL: a POST there would evict the page from its cache', async () => {
    const redirect = await send(`${backend.origin}/graphql`, { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(redirect.status).toBe(302);
    expect(redirect.headers['location']).toBe('/graphiql');
  });

  it('the GraphiQL page is small, with an ETag that turns a reload into a 304 whatever its query string', async () => {
    const first = await send(`${backend.origin}/graphiql`, { headers: { ...PAGE, 'accept-encoding': 'gzip, deflate, br' } });
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(first.headers['cache-control']).toBe('no-cache');
    expect(first.body.length).toBeLessThan(10_000);
    const etag = first.headers['etag'] as string;
    expect(etag).toMatch(/^".+"$/);
    // GraphiQL puts the edited query in the page's URL: the same page answers, with the same ETag.
    const edited = `${backend.origin}/graphiql?query=${encodeURIComponent('{ viewer { role } }')}`;
    const reload = await send(edited, { headers: { ...PAGE, 'accept-encoding': 'gzip, deflate, br', 'if-none-match': etag } });
    expect(reload.status).toBe(304);
    expect(reload.body.length).toBe(0);
    expect(reload.headers['etag']).toBe(etag);
  });

  it("GraphiQL's files arrive in brotli, named by their content and cached for a year: under 2 MB in all but the fonts, fetched only when used", async () => {
    const page = (await send(`${backend.origin}/graphiql`, { headers: PAGE })).body.toString();
    const named = [...page.matchAll(/"(\/graphiql\/assets\/[^"]+)"/g)].map((match) => match[1]!);
    expect(named.map((path) => path.replace(/\.[^.]+\./, '.*.')).sort()).toEqual(
      [
        '/graphiql/assets/editor.*.worker.js',
        '/graphiql/assets/favicon.*.ico',
        '/graphiql/assets/graphiql.*.css',
        '/graphiql/assets/graphiql.*.js',
        '/graphiql/assets/graphql.*.worker.js',
        '/graphiql/assets/json.*.worker.js',
      ].sort(),
    );
    let everyVisit = 0;
    let style = '';
    for (const path of named) {
      const file = await send(`${backend.origin}${path}`, { headers: { 'accept-encoding': 'gzip, deflate, br' } });
      expect({ path, status: file.status, cache: file.headers['cache-control'] }).toEqual({
        path,
        status: 200,
        cache: 'public, max-age=31536000, immutable',
      });
      expect(path).toContain(`.${(file.headers['etag'] as string).slice(1, 13)}.`);
      expect(file.headers['content-encoding']).toBe('br');
      everyVisit += file.body.length;
      if (path.endsWith('.css')) style = zlib.brotliDecompressSync(file.body).toString();
    }
    expect(everyVisit).toBeGreaterThan(1_000_000);
    expect(everyVisit).toBeLessThan(TWO_MB);
    // The style sheet's fonts are files of their own, sent as they are (woff2 is compressed already).
    const fonts = [...new Set([...style.matchAll(/url\((\/graphiql\/assets\/font\.[^)]+)\)/g)].map((match) => match[1]!))];
    expect(fonts.length).toBeGreaterThan(10);
    // Only inlined files smaller than a request are left in the style sheet.
    const inlined = [...style.matchAll(/url\(['"]?data:[^)]*\)/g)].map((match) => match[0].length);
    expect(inlined.filter((length) => length > 4_200)).toEqual([]);
    const woff2 = await send(`${backend.origin}${fonts.find((font) => font.endsWith('.woff2'))}`, { headers: { 'accept-encoding': 'br' } });
    expect(woff2.headers['content-type']).toBe('font/woff2');
    expect(woff2.headers['content-encoding']).toBeUndefined();
    // The icon keeps the images a tab shows: 16 to 48 pixels.
    const icon = await send(`${backend.origin}${named.find((path) => path.endsWith('.ico'))}`);
    expect(icon.body.readUInt16LE(2)).toBe(1);
    const widths = Array.from({ length: icon.body.readUInt16LE(4) }, (_, i) => icon.body[6 + 16 * i]!);
    expect(widths.sort((a, b) => a - b)).toEqual([16, 32, 48]);
    // A file of an older build is gone; the page names the current ones.
    expect((await send(`${backend.origin}/graphiql/assets/graphiql.0123456789ab.js`)).status).toBe(404);
  });

  it("GraphiQL's script in gzip for a client without brotli, and as it is for one that accepts neither", async () => {
    const page = (await send(`${backend.origin}/graphiql`, { headers: PAGE })).body.toString();
    const script = /"(\/graphiql\/assets\/graphiql\.[^"]+\.js)"/.exec(page)![1]!;
    const gzipped = await send(`${backend.origin}${script}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    const plain = await send(`${backend.origin}${script}`);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(zlib.gunzipSync(gzipped.body).equals(plain.body)).toBe(true);
    expect(gzipped.headers['etag']).toBe(plain.headers['etag']);
  });

  it('GraphQL results (the fast path to Yoga) and /metrics are compressed above the threshold, not below', async () => {
    const query = (text: string) =>
      send(`${backend.origin}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip', 'x-hasura-role': 'operator' },
        body: JSON.stringify({ query: text }),
      });
    const large = await query('{ __schema { types { name description fields { name description } } } }');
    expect(large.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(large.body).length).toBeGreaterThan(COMPRESSION_THRESHOLD_BYTES);
    expect(JSON.parse(zlib.gunzipSync(large.body).toString()).data.__schema.types.length).toBeGreaterThan(10);

    const small = await query('{ __typename }');
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(small.body.toString())).toEqual({ data: { __typename: 'Query' } });

    const metrics = await send(`${backend.origin}/metrics`, { headers: { 'accept-encoding': 'br' } });
    expect(metrics.headers['content-encoding']).toBe('br');
    expect(zlib.brotliDecompressSync(metrics.body).toString()).toContain('graphql_request_duration_seconds');
  });
});
