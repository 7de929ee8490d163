import { request as httpRequest } from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPRESSION_THRESHOLD_BYTES } from '../src/http/node-server.js';
import { createTestBackend, serveOverHttp, type TestBackend } from './support/harness.js';

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
  let backend: TestBackend;
  let base: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    backend = await createTestBackend();
    const served = await serveOverHttp(backend);
    base = served.url.replace(/\/graphql$/, '');
    close = () => served.server.close();
  });
  afterAll(async () => {
    await close?.();
    await backend?.close();
  });

  it('a browser asking /graphql for a page is sent to GraphiQL: a POST there would evict the page from its cache', async () => {
    const redirect = await send(`${base}/graphql`, { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(redirect.status).toBe(302);
    expect(redirect.headers['location']).toBe('/graphiql');
  });

  it('the GraphiQL page arrives in brotli under 2 MB, with an ETag that turns a reload into a bodiless 304', async () => {
    const first = await send(`${base}/graphiql`, { headers: { ...PAGE, 'accept-encoding': 'gzip, deflate, br' } });
    expect(first.status).toBe(200);
    expect(first.headers['content-encoding']).toBe('br');
    expect(first.body.length).toBeLessThan(TWO_MB);
    const html = zlib.brotliDecompressSync(first.body).toString();
    expect(html).toContain('GraphiQL');
    expect(html.length).toBeGreaterThan(first.body.length * 3);
    expect(first.headers['cache-control']).toBe('no-cache');
    const etag = first.headers['etag'] as string;
    expect(etag).toMatch(/^".+"$/);

    const reload = await send(`${base}/graphiql`, { headers: { ...PAGE, 'accept-encoding': 'gzip, deflate, br', 'if-none-match': etag } });
    expect(reload.status).toBe(304);
    expect(reload.body.length).toBe(0);
    expect(reload.headers['etag']).toBe(etag);
  });

  it('the GraphiQL page in gzip for a client without brotli, and as it is for one that accepts neither', async () => {
    const gzipped = await send(`${base}/graphiql`, { headers: { ...PAGE, 'accept-encoding': 'gzip' } });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    const plain = await send(`${base}/graphiql`, { headers: PAGE });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(zlib.gunzipSync(gzipped.body).equals(plain.body)).toBe(true);
    expect(gzipped.headers['etag']).toBe(plain.headers['etag']);
  });

  it('GraphQL results (the fast path to Yoga) and /metrics are compressed above the threshold, not below', async () => {
    const query = (text: string) =>
      send(`${base}/graphql`, {
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

    const metrics = await send(`${base}/metrics`, { headers: { 'accept-encoding': 'br' } });
    expect(metrics.headers['content-encoding']).toBe('br');
    expect(zlib.brotliDecompressSync(metrics.body).toString()).toContain('graphql_request_duration_seconds');
  });
});
