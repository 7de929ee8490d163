import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCEPT } from '../src/client/mutate.js';
import {
  asOperator,
  asTenantAdmin,
  asUser,
  callAction,
  createTenant,
  serveTestBackend,
  type Headers,
  type ServedBackend,
} from './support/harness.js';

/**
 * A POST of plain parameters takes Yoga's whole pipeline on the socket (src/http/node-dispatch.ts)
 * and on the Fetch path (src/http/router.ts), and a document validated before is neither parsed
 * nor validated again. What a client reads must not depend on the path, on the Accept header's
 * spelling or on whether the document is known: the same request with `text/event-stream` added to
 * its Accept (which changes nothing for a single result: Yoga's JSON processor comes after the
 * stream's and keeps the choice) is the yardstick, its repeats on the socket and in process.
 */

/** The same Accept (an empty one reads as any type) with an event stream named too: Yoga's whole pipeline answers it, in the same media type. */
const viaYogaOf = (accept: string) => `${accept || '*/*'}, text/event-stream`;

interface Case {
  name: string;
  body: Record<string, unknown>;
  headers: Headers;
  /** Identified, parsed and validated without an error: its repeats are executed from the known document. */
  executes: boolean;
}

const TENANT = 'plain-post';
const ILL_FORMED = 'ab\ud800cd';

const CASES: Case[] = [
  { name: 'a query', body: { query: '{ viewer { role tenantId } }' }, headers: asOperator(), executes: true },
  {
    name: 'a mutation',
    body: { query: 'mutation ($t: String!) { createContract(input: { title: $t }) { contract { title } } }', variables: { t: 'Lease' } },
    headers: asUser(TENANT),
    executes: true,
  },
  {
    name: 'a variable of the wrong type',
    body: { query: 'mutation ($t: String!) { createContract(input: { title: $t }) { contract { title } } }', variables: { t: 5 } },
    headers: asUser(TENANT),
    executes: true,
  },
  {
    name: 'an ill-formed string',
    body: { query: 'mutation ($t: String!) { createContract(input: { title: $t }) { contract { title } } }', variables: { t: ILL_FORMED } },
    headers: asUser(TENANT),
    executes: true,
  },
  {
    name: 'a refusal by role',
    body: { query: 'mutation { createTenant(input: { id: "x-plain", name: "X", monthlyCapYen: 1 }) { tenant { id } } }' },
    headers: asUser(TENANT),
    executes: true,
  },
  {
    name: 'a cost over MAX_QUERY_COST',
    body: { query: 'query ($n: Int) { contracts(first: $n) { id documents(first: $n) { id } } }', variables: { n: 100 } },
    headers: asTenantAdmin(TENANT),
    executes: true,
  },
  {
    name: 'a wrong action secret',
    body: { query: '{ viewer { role } }' },
    headers: { 'x-action-secret': 'not-the-secret' },
    executes: false,
  },
  { name: 'an unknown field', body: { query: '{ viewer { nope } }' }, headers: asOperator(), executes: false },
  { name: 'a parse error', body: { query: '{ viewer { role ' }, headers: asOperator(), executes: false },
  // Each inline fragment is a level, then viewer and role.
  {
    name: 'nesting past MAX_QUERY_DEPTH',
    body: { query: `{ ${'... on Query { '.repeat(9)}viewer { role }${' }'.repeat(9)} }` },
    headers: asOperator(),
    executes: false,
  },
  {
    name: 'two operations and no operationName',
    body: { query: 'query A { viewer { role } } query B { viewer { tenantId } }' },
    headers: asOperator(),
    executes: false,
  },
  {
    name: 'an operationName the document lacks',
    body: { query: '{ viewer { role } }', operationName: 'Missing' },
    headers: asOperator(),
    executes: false,
  },
  { name: 'an empty operationName', body: { query: '{ viewer { role } }', operationName: '' }, headers: asOperator(), executes: false },
  {
    name: 'a body typed application/graphql-response+json, which Yoga does not read',
    body: { query: '{ viewer { role } }' },
    headers: { ...asOperator(), 'content-type': 'application/graphql-response+json' },
    executes: false,
  },
  {
    name: 'an unexpected parameter',
    body: { query: '{ viewer { role } }', unexpected: 1 },
    headers: asOperator(),
    executes: false,
  },
];

const JSON_HEADERS = { 'content-type': 'application/json' };
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g;

/** What a client reads of an answer, with the ids and times that differ between any two requests blanked. */
async function reading(response: Response) {
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    retryAfter: response.headers.get('retry-after'),
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.text()).replace(UUID, '<id>').replace(TIMESTAMP, '<time>'),
  };
}

type Send = (body: unknown, headers: Headers) => Promise<Response>;

describe('a POST of plain parameters', () => {
  let backend: ServedBackend;
  let overSocket: Send;
  let inProcess: Send;
  const knownRuns = async () => (await backend.services.metrics.knownDocumentOperations.get()).values[0]?.value ?? 0;

  beforeAll(async () => {
    backend = await serveTestBackend({ env: { MAX_QUERY_COST: '500' } });
    await createTenant(backend, TENANT);
    const init = (body: unknown, headers: Headers) => ({
      method: 'POST',
      headers: { ...JSON_HEADERS, ...headers },
      body: JSON.stringify(body),
    });
    overSocket = (body, headers) => fetch(backend.url, init(body, headers));
    inProcess = (body, headers) => backend.app.fetch(new Request(backend.url, init(body, headers)));
  });
  afterAll(() => backend.close());

  for (const [path, send] of [
    ['on the socket', () => overSocket],
    ['in process', () => inProcess],
  ] as const) {
    for (const { name, body, headers, executes } of CASES) {
      it(`${path}: ${name} reads as Yoga answers it, repeats included${executes ? ', which run from the known document' : ''}`, async () => {
        const viaYoga = await reading(await send()(body, { ...headers, accept: viaYogaOf('application/json') }));
        const before = await knownRuns();
        const plain = [];
        for (let i = 0; i < 3; i++) plain.push(await reading(await send()(body, { ...headers, accept: 'application/json' })));
        expect(plain).toEqual([viaYoga, viaYoga, viaYoga]);
        // Yoga's request above parsed and validated the document: every repeat here is known.
        expect((await knownRuns()) - before).toBe(executes ? 3 : 0);
      });
    }
  }

  it('takes a request without Accept (in process) or accepting anything (on the socket) as application/json, from the known document', async () => {
    const body = { query: '{ viewer { role tenantId } }' };
    const viaYoga = await reading(await overSocket(body, { ...asOperator(), accept: viaYogaOf('application/json') }));
    const before = await knownRuns();
    expect([
      await reading(await inProcess(body, asOperator())),
      await reading(await overSocket(body, { ...asOperator(), accept: '*/*' })),
    ]).toEqual([viaYoga, viaYoga]);
    expect((await knownRuns()) - before).toBe(2);
  });

  it('answers application/graphql-response+json as Yoga does: a validation error is 400 there', async () => {
    const body = { query: '{ viewer { nope } }' };
    const strict = { ...asOperator(), accept: 'application/graphql-response+json' };
    const viaYoga = await reading(await overSocket(body, { ...strict, accept: viaYogaOf(strict.accept) }));
    expect(viaYoga.status).toBe(400);
    expect(await reading(await overSocket(body, strict))).toEqual(viaYoga);
  });

  // The project's typed client asks for both JSON types: its keyed mutations are answered here too.
  for (const accept of ['application/json', ACCEPT]) {
    it(`replays an Idempotency-Key with the replay mark, as Yoga does, from the known document (Accept: ${accept})`, async () => {
      const body = {
        query: 'mutation ($t: String!) { createContract(input: { title: $t }) { contract { id title } } }',
        variables: { t: 'Once' },
      };
      const answers = async (key: string, accept: string) => {
        const headers = { ...asUser(TENANT), 'idempotency-key': key, accept };
        return [await reading(await overSocket(body, headers)), await reading(await overSocket(body, headers))];
      };
      const viaYoga = await answers(`plain-post-yoga ${accept}`, viaYogaOf(accept));
      const before = await knownRuns();
      const plain = await answers(`plain-post-plain ${accept}`, accept);
      expect(viaYoga[1]!.replayed).toBe('true');
      expect(plain).toEqual(viaYoga);
      expect((await knownRuns()) - before).toBe(2);
    });
  }

  it('answers a Hasura action on the socket as on the Fetch path, repeats from its known document', async () => {
    const onSocket = async (request: Request) =>
      fetch(`${backend.origin}/actions`, { method: 'POST', headers: request.headers, body: await request.text() });
    for (const [name, input, session] of [
      ['createContract', { title: 'Via Hasura' }, asUser(TENANT)],
      ['createTenant', { id: 'x-action', name: 'X', monthlyCapYen: 1 }, asUser(TENANT)],
    ] as const) {
      const action = async (target: typeof onSocket) => reading(await callAction(target, name, input, session));
      const inProcess = await action(backend.app.fetch);
      const before = await knownRuns();
      expect([await action(onSocket), await action(onSocket)]).toEqual([inProcess, inProcess]);
      expect((await knownRuns()) - before).toBe(2);
    }
  });

  it('answers a request with an Origin with its CORS and Vary headers', async () => {
    const response = await overSocket({ query: '{ viewer { role } }' }, { ...asOperator(), origin: 'http://localhost:3000' });
    expect(response.headers.get('access-control-allow-origin')).not.toBeNull();
    expect(response.headers.get('vary')).toMatch(/origin/i);
  });
});

describe('a POST of plain parameters, with one turn', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend({ env: { MAX_IN_FLIGHT: '1', DB_POOL_ACQUIRE_TIMEOUT_MS: '2000' } });
  });
  afterAll(() => backend.close());

  it('takes its turn once, whether its document is new (Yoga reads it inside the turn) or known', async () => {
    const send = () =>
      fetch(backend.url, {
        method: 'POST',
        headers: { ...JSON_HEADERS, ...asOperator() },
        body: JSON.stringify({ query: '{ viewer { role } }' }),
      });
    // A second admission would wait for the only turn, held by the request itself, and answer TRY_AGAIN.
    for (let i = 0; i < 2; i++) expect(await (await send()).json()).toEqual({ data: { viewer: { role: 'operator' } } });
    expect(backend.services.admission.stats()).toEqual({ inFlight: 0, queued: 0 });
  });
});
