import { randomUUID } from 'node:crypto';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { LoadClient, type GraphQLReply } from './load/client.js';
import { countBy, summarize } from './load/stats.js';
import {
  asUser,
  createContractRow,
  createTenant,
  createTestBackend,
  serveOverHttp,
  serveTestBackend,
  type TestBackend,
} from './support/harness.js';

const ANONYMOUS_CLIENTS = 6;
const MEMBERS = [
  ['flood-a', 'member-1'],
  ['flood-a', 'member-2'],
  ['flood-b', 'member-1'],
  ['flood-b', 'member-2'],
] as const;
/** Requests each member sends per batch; batches with and without the anonymous clients alternate, so the machine's own load falls on both alike. */
const REQUESTS_PER_MEMBER = 20;
const ROUNDS = 4;

/**
 * The most expensive document the limits let a caller without a session send (measured against
 * copies of `viewer { role }` and flat selections): copies of a contract list with its documents
 * (4 selections each) up to MAX_SELECTIONS, whose pairwise merge check, arguments included, is
 * validation's worst case; with a comment no cache has seen. It validates, and its execution is
 * refused for want of a session.
 */
const expensiveAnonymousDocument = (maxSelections: number) =>
  `{ ${'contracts(first: 1) { id documents(first: 1) { id } } '.repeat(Math.floor(maxSelections / 4))}} # ${randomUUID()}`;

const codeOf = (reply: GraphQLReply) => String(reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');

describe('callers without a session get a small share: their documents are read in it, never ahead of members', () => {
  let backend: TestBackend;
  const contracts = new Map<string, string>();
  beforeAll(async () => {
    backend = await createTestBackend();
    for (const tenant of new Set(MEMBERS.map(([tenant]) => tenant))) {
      await createTenant(backend, tenant);
      contracts.set(tenant, await createContractRow(backend, tenant));
    }
  });
  afterAll(() => backend.close());

  it(`serves members throughout while ${ANONYMOUS_CLIENTS} anonymous clients send the most expensive valid document in a loop: the clients get their rate and nothing more`, async ({
    annotate,
  }) => {
    const { url, server } = await serveOverHttp(backend);
    const client = new LoadClient(url, MEMBERS.length + ANONYMOUS_CLIENTS);
    const createDocument = print(CreateContractDocumentDocument);
    const memberErrors: string[] = [];
    const members = async (): Promise<number[]> => {
      const latencies = await Promise.all(
        MEMBERS.map(async ([tenant, member]) => {
          const mine: number[] = [];
          for (let i = 0; i < REQUESTS_PER_MEMBER; i++) {
            const reply =
              i % 2 === 0
                ? await client.graphql('{ contracts(first: 5) { id title } }', {}, asUser(tenant, member))
                : await client.graphql(createDocument, { input: { contractId: contracts.get(tenant) } }, asUser(tenant, member));
            mine.push(reply.latencyMs);
            if (codeOf(reply) !== 'OK') memberErrors.push(codeOf(reply));
          }
          return mine;
        }),
      );
      return latencies.flat();
    };
    try {
      await client.open();
      await members(); // warm-up: JIT, prepared statements, pool connections
      const alone: number[] = [];
      const during: number[] = [];
      const anonymousReplies: GraphQLReply[] = [];
      const floodStarted = performance.now();
      for (let round = 0; round < ROUNDS; round++) {
        alone.push(...(await members()));
        let flooding = true;
        const flood = Array.from({ length: ANONYMOUS_CLIENTS }, async () => {
          while (flooding)
            anonymousReplies.push(await client.graphql(expensiveAnonymousDocument(backend.config.edge.maxSelections), {}, {}));
        });
        during.push(...(await members()));
        flooding = false;
        await Promise.all(flood);
      }
      const floodSeconds = (performance.now() - floodStarted) / 1000;
      const outcomes = countBy(anonymousReplies, (reply) =>
        codeOf(reply) === 'OK' ? 'OK' : `${codeOf(reply)} (${reply.body.errors![0]!.extensions!['reason'] ?? '-'})`,
      );
      const [withoutThem, withThem] = [summarize(alone), summarize(during)];
      await annotate(
        `members without anonymous clients: p50 ${withoutThem.p50.toFixed(1)} ms, p95 ${withoutThem.p95.toFixed(1)} ms; ` +
          `with ${ANONYMOUS_CLIENTS} anonymous clients: p50 ${withThem.p50.toFixed(1)} ms, p95 ${withThem.p95.toFixed(1)} ms ` +
          `(${(withThem.p95 / withoutThem.p95).toFixed(2)}x), ${ROUNDS} rounds of each; the anonymous answers ${JSON.stringify(outcomes)} in ${floodSeconds.toFixed(1)} s`,
      );
      expect(memberErrors).toEqual([]);
      // Each was validated and then refused for want of a session: the cost was paid in the anonymous share.
      expect(Object.keys(outcomes)).toEqual(['UNAUTHENTICATED (-)']);
      // All from one address: its bucket's burst, then its rate for as long as the flood lasted,
      // however fast the loop sent. (What it cost members is the figure above, not a check: this
      // machine's own load moves a p95.)
      const { rate, burst } = backend.config.edge.anonymous;
      // (One more for a reservation's whole milliseconds.)
      expect(anonymousReplies.length).toBeLessThanOrEqual(burst + Math.ceil(rate * floodSeconds) + 1);
    } finally {
      client.close();
      await server.close();
    }
  });
});

describe('the client address of a caller without a session: the peer, or X-Forwarded-For behind TRUST_PROXY', () => {
  /** One token per address and no waiting room: an address's second request is refused at once. */
  const ONE_EACH = { ANONYMOUS_RATE: '1', ANONYMOUS_BURST: '1', ANONYMOUS_QUEUE_MAX: '0' };

  async function codesFor(env: Record<string, string>, forwardedFor: string[]): Promise<string[]> {
    const backend = await serveTestBackend({ env: { ...ONE_EACH, ...env } });
    try {
      const codes: string[] = [];
      for (const address of forwardedFor) {
        const response = await fetch(backend.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
          body: JSON.stringify({ query: '{ viewer { role } }' }),
        });
        const body = (await response.json()) as { errors?: { extensions: { code: string } }[] };
        codes.push(body.errors?.[0]?.extensions.code ?? 'OK');
      }
      return codes;
    } finally {
      await backend.close();
    }
  }

  it('ignores X-Forwarded-For unless TRUST_PROXY believes the peer, and then keys each forwarded client on its own', async () => {
    // Without TRUST_PROXY every request is the loopback peer's: a forged header buys no second token.
    expect(await codesFor({}, ['203.0.113.1', '203.0.113.2'])).toEqual(['OK', 'TRY_AGAIN']);
    // Behind a trusted proxy (here the loopback), each forwarded client has a bucket of its own.
    expect(await codesFor({ TRUST_PROXY: 'loopback' }, ['203.0.113.1', '203.0.113.2', '203.0.113.1'])).toEqual(['OK', 'OK', 'TRY_AGAIN']);
    // A proxy that is not trusted is the client: the address it forwards is not believed.
    expect(await codesFor({ TRUST_PROXY: '10.0.0.0/8' }, ['203.0.113.1', '203.0.113.2'])).toEqual(['OK', 'TRY_AGAIN']);
  });
});
