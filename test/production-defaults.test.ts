import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asUser, createTenant, createTestBackend, errorCodes, gql, serveTestBackend, type ServedBackend } from './support/harness.js';

/** What a production server tells and accepts by default: no echoed input, no introspection, CORS only for listed origins, JSON bodies only, /metrics behind its token. */
const SECRET = 'edge-secret-0123456789abcdef';
const METRICS_TOKEN = 'metrics-token-0123456789';
const APP_ORIGIN = 'https://app.example.com';

/** A production server: a secret, introspection and CORS at their production defaults. */
const PRODUCTION = { NODE_ENV: 'production', ACTION_SECRET: SECRET };
const asMember = (tenant: string) => ({ ...asUser(tenant), 'x-action-secret': SECRET });

/** A request sent over the backend's socket, as a client's would be. */
const overSocket = (backend: ServedBackend) => async (request: Request) => {
  const { pathname, search } = new URL(request.url);
  const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.text();
  return fetch(`${backend.origin}${pathname}${search}`, { method: request.method, headers: request.headers, body });
};

// Every probe on both paths a request can take: in process (the Fetch path) and on the socket.
for (const path of ['in process', 'on the socket'] as const) {
  describe(`production hygiene, ${path}`, () => {
    let backend: ServedBackend;
    let send: (request: Request) => Promise<Response>;
    beforeAll(async () => {
      backend = await serveTestBackend({ env: { ...PRODUCTION, CORS_ORIGINS: APP_ORIGIN, METRICS_TOKEN } });
      send = path === 'in process' ? backend.app.fetch : overSocket(backend);
      await createTenant(backend, 'edge');
    });
    afterAll(() => backend.close());

    const post = (body: string, headers: Record<string, string>) =>
      send(new Request('http://test.local/graphql', { method: 'POST', headers, body }));

    it('answers a body that is not JSON 400 BAD_USER_INPUT, without repeating any of it', async () => {
      const response = await post('{"query": "a-secret-the-client-typed', { 'content-type': 'application/json' });
      expect(response.status).toBe(400);
      const text = await response.text();
      expect(JSON.parse(text).errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(text).not.toContain('a-secret-the-client-typed');
    });

    it('answers no introspection and no field suggestions', async () => {
      // Each Accept twice (the second finds the document known): neither may take the other's
      // validation of the document as leave to introspect.
      for (const accept of ['application/json', 'application/json, text/event-stream']) {
        for (let repeat = 0; repeat < 2; repeat++) {
          const introspection = await gql(send, '{ __schema { types { name } } }', {}, { ...asMember('edge'), accept });
          expect(introspection.body.data ?? null).toBeNull();
          expect(new Set(errorCodes(introspection))).toEqual(new Set(['BAD_USER_INPUT']));
          expect(introspection.text).toMatch(/introspection/i);
        }
      }
      const typo = await gql(send, '{ contract { titel } contracs { id } }', {}, asMember('edge'));
      expect(typo.body.errors?.length).toBeGreaterThan(0);
      expect(typo.text).not.toMatch(/Did you mean/);
      expect(typo.text).not.toMatch(/"contracts"|"title"/);
    });

    it('introspects when GRAPHQL_INTROSPECTION=true, with suggestions', async () => {
      const open = await createTestBackend({ databaseUrl: backend.databaseUrl, env: { ...PRODUCTION, GRAPHQL_INTROSPECTION: 'true' } });
      try {
        const introspection = await gql(open.app.fetch, '{ __schema { queryType { name } } }', {}, asMember('edge'));
        expect(introspection.body.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
        const typo = await gql(open.app.fetch, '{ contracs { id } }', {}, asMember('edge'));
        expect(typo.text).toMatch(/Did you mean [^?]*\\"contracts\\"/);
      } finally {
        await open.close();
      }
    });

    it('allows a listed origin with credentials and the headers a client needs, and nobody else', async () => {
      const from = (origin: string) =>
        post(JSON.stringify({ query: '{ viewer { role } }' }), { 'content-type': 'application/json', origin, ...asMember('edge') });
      const listed = await from(APP_ORIGIN);
      expect(listed.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
      expect(listed.headers.get('access-control-allow-credentials')).toBe('true');
      expect(listed.headers.get('access-control-expose-headers')?.toLowerCase().split(/,\s*/).sort()).toEqual([
        'idempotent-replayed',
        'retry-after',
        'traceparent',
        'x-request-id',
      ]);
      expect(listed.headers.get('vary')).toMatch(/Origin/i);
      const unlisted = await from('https://evil.example.net');
      expect(unlisted.headers.get('access-control-allow-origin')).toBeNull();
      expect(unlisted.headers.get('access-control-allow-credentials')).toBeNull();
      const preflight = await send(
        new Request('http://test.local/graphql', {
          method: 'OPTIONS',
          headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'POST' },
        }),
      );
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    });

    it('executes only JSON bodies: a form-encoded, multipart or text mutation answers 415 and writes nothing', async () => {
      const query = 'mutation { createContract(input: { title: "from a form" }) { contract { id } } }';
      const form = new URLSearchParams({ query }).toString();
      const bodies: [string, string][] = [
        ['application/x-www-form-urlencoded', form],
        [
          'multipart/form-data; boundary=x',
          `--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${JSON.stringify({ query })}\r\n--x--\r\n`,
        ],
        ['text/plain', JSON.stringify({ query })],
      ];
      for (const [contentType, body] of bodies) {
        for (const path of ['/graphql', '/actions']) {
          const response = await send(
            new Request(`http://test.local${path}`, {
              method: 'POST',
              headers: { 'content-type': contentType, ...asMember('edge') },
              body,
            }),
          );
          expect({ contentType, path, status: response.status }).toEqual({ contentType, path, status: 415 });
          // A GraphQL response on /graphql, Hasura's shape on /actions.
          const answer = (await response.json()) as { errors?: { extensions: { code: string } }[]; extensions?: { code: string } };
          expect((path === '/graphql' ? answer.errors?.[0] : answer)?.extensions?.code).toBe('BAD_USER_INPUT');
        }
      }
      const { rows } = await backend.sql.query("select count(*)::int as n from contracts where tenant_id = 'edge'");
      expect(rows[0].n).toBe(0);
      const json = await post(JSON.stringify({ query }), { 'content-type': 'application/json; charset=utf-8', ...asMember('edge') });
      expect(json.status).toBe(200);
    });

    it('guards /metrics with METRICS_TOKEN; /health tells nothing about the process', async () => {
      const metrics = (authorization?: string) =>
        send(new Request('http://test.local/metrics', { headers: authorization ? { authorization } : {} }));
      expect((await metrics()).status).toBe(401);
      expect((await metrics('Bearer not-the-token-at-all')).status).toBe(401);
      const allowed = await metrics(`Bearer ${METRICS_TOKEN}`);
      expect(allowed.status).toBe(200);
      expect(await allowed.text()).toMatch(/graphql_operations\{state="in_flight",pid="\d+"\}/);
      const health = await send(new Request('http://test.local/health'));
      expect(await health.json()).toEqual({ status: 'ok' });
    });
  });
}
