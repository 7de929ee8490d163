import proxyaddr from 'proxy-addr';
import { z } from 'zod';
import { isHttpUrl } from '../http-url.js';
import { custom, file, flag, group, refuse, secret, wholeNumber } from './kinds.js';

const ANY_ORIGIN = '*';

/** Items separated by commas, blanks dropped. */
const commaList = (raw: string) =>
  raw
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

/** Origins such as https://app.example.com (scheme://host[:port], as a browser sends them), or * for any. */
const origins = z.string().transform((raw, ctx) => {
  const list = commaList(raw);
  const wrong = list.find((origin) => origin !== ANY_ORIGIN && !(isHttpUrl(origin) && new URL(origin).origin === origin));
  if (wrong !== undefined) return refuse(ctx, `"${wrong}" is not an origin (expected scheme://host[:port] with no path or trailing slash)`);
  if (list.includes(ANY_ORIGIN) && list.length > 1) return refuse(ctx, '* stands alone: either any origin or a list of origins');
  return list;
});

/** What proxy-addr accepts (addresses, CIDR ranges, its names), checked by compiling it. */
const trustedProxies = z.string().transform((raw, ctx) => {
  const list = commaList(raw);
  try {
    proxyaddr.compile(list);
  } catch (error) {
    const problem = (error as Error).message;
    return refuse(ctx, `expected addresses, CIDR ranges or loopback, linklocal, uniquelocal separated by commas: ${problem}`);
  }
  return list;
});

/** What the public endpoint accepts from anyone on the internet (docs/design.md §8). */
export const edgeVariables = group('The public edge', {
  maxQueryDepth: wholeNumber({ name: 'MAX_QUERY_DEPTH', default: 10, min: 1, max: 100 }).describe(
    'nesting of selections (inline fragments count; introspection exempt)',
  ),
  maxAliases: wholeNumber({ name: 'MAX_ALIASES', default: 15, min: 0, max: 1_000 }).describe(
    'aliases in one operation, root fields included',
  ),
  maxQueryTokens: wholeNumber({ name: 'MAX_QUERY_TOKENS', default: 1_000, min: 50, max: 100_000 }).describe(
    'lexical tokens the parser reads before it refuses a document',
  ),
  maxQueryCost: wholeNumber({ name: 'MAX_QUERY_COST', default: 5_000, min: 1, max: 10_000_000 }).describe(
    'cost of one operation: a field costs 1, a list its `first` (or its default) times its selection',
  ),
  // Its default follows NODE_ENV (src/core/config.ts).
  introspection: flag({ name: 'GRAPHQL_INTROSPECTION', shown: '`true` in development, else `false`' }).describe(
    'answer introspection; when off, error messages carry no "Did you mean" suggestions',
  ),
  // Its default follows NODE_ENV (src/core/config.ts).
  corsOrigins: custom({
    name: 'CORS_ORIGINS',
    shown: '`*` in development, none otherwise',
    accepts: 'origins (`scheme://host[:port]`) separated by commas, or `*`',
    schema: origins,
  }).describe('origins allowed with credentials; `*` allows any origin without credentials'),
  metricsToken: secret({ name: 'METRICS_TOKEN', minLength: 16 }).describe(
    'when set, `/metrics` needs `Authorization: Bearer <token>`; unset outside development, the server starts but warns at start-up ' +
      'and its banner marks `/metrics` open',
  ),
  trustedDocumentsPath: file({ name: 'TRUSTED_DOCUMENTS' }).describe(
    'path of a persisted-documents manifest (hash -> document, the hash bare or as `sha256:<hash>`): only those documents run, ' +
      'for every role but the platform operator',
  ),
  // Its default follows DB_POOL_MAX (src/core/config.ts).
  maxInFlight: wholeNumber({ name: 'MAX_IN_FLIGHT', shown: '`DB_POOL_MAX`', min: 1, max: 10_000 }).describe(
    'GraphQL operations executing at once; each holds at most one connection at a time',
  ),
  tenantQueueMax: wholeNumber({ name: 'TENANT_QUEUE_MAX', default: 256, min: 0, max: 100_000 }).describe(
    "operations of one tenant waiting for a turn; beyond it the member holding most of the tenant's turns (executing and waiting) " +
      'is answered `TRY_AGAIN` first ([fairness](design.md#8-the-public-edge))',
  ),
  anonymous: {
    maxInFlight: wholeNumber({ name: 'ANONYMOUS_MAX_IN_FLIGHT', default: 1, min: 1, max: 10_000 }).describe(
      'operations of callers without a session executing at once, all such callers together',
    ),
    queueMax: wholeNumber({ name: 'ANONYMOUS_QUEUE_MAX', default: 16, min: 0, max: 100_000 }).describe(
      'operations of callers without a session waiting for a turn, together; beyond it the client address holding most is answered `TRY_AGAIN` first',
    ),
    rate: wholeNumber({ name: 'ANONYMOUS_RATE', default: 2, min: 1, max: 1_000_000 }).describe(
      "operations per second one client address may start without a session; beyond it an operation waits for its address's next token " +
        'in the anonymous waiting room (`ANONYMOUS_QUEUE_MAX`), and is answered `TRY_AGAIN` with `Retry-After` when the room is full or the ' +
        'token would come after `DB_POOL_ACQUIRE_TIMEOUT_MS`, before its document is read. Per HTTP process: with `WEB_CONCURRENCY=N` ' +
        'an address may start up to N times as many',
    ),
    burst: wholeNumber({ name: 'ANONYMOUS_BURST', default: 2, min: 1, max: 1_000_000 }).describe(
      'operations one client address may start at once without a session (the bucket of `ANONYMOUS_RATE`)',
    ),
  },
  memberWriteRate: wholeNumber({ name: 'MEMBER_WRITE_RATE', default: 50, min: 1, max: 1_000_000 }).describe(
    "mutations (root fields) one session of a tenant (a member, or the tenant's admin) may start per second; more are answered " +
      '`TRY_AGAIN` with `Retry-After` before anything is written. Per HTTP process: with `WEB_CONCURRENCY=N` a member may write up to ' +
      'N times as fast. No scenario of the load tool or the benchmark comes near it: their busiest member writes about 25 a second ' +
      'at 2,000 requests a second',
  ),
  memberWriteBurst: wholeNumber({ name: 'MEMBER_WRITE_BURST', default: 200, min: 1, max: 1_000_000 }).describe(
    'mutations one session of a tenant may start at once (the bucket of `MEMBER_WRITE_RATE`)',
  ),
  trustProxy: custom({
    name: 'TRUST_PROXY',
    shown: "(none: the socket's peer)",
    accepts: 'addresses, CIDR ranges (`10.0.0.0/8`) or `loopback`, `linklocal`, `uniquelocal`, separated by commas',
    default: [],
    schema: trustedProxies,
  }).describe(
    'the proxies whose `X-Forwarded-For` is believed for the client address of the limits above. The client is the nearest address ' +
      'in `X-Forwarded-For` that none of them vouches for',
  ),
  maxSelections: wholeNumber({ name: 'MAX_SELECTIONS', default: 200, min: 10, max: 100_000 }).describe(
    'fields, fragment spreads and inline fragments in one document; checked before validation, whose cost grows with their square',
  ),
  documentCacheBytes: wholeNumber({
    name: 'DOCUMENT_CACHE_BYTES',
    default: 16 * 1024 * 1024,
    shown: '16777216 (16 MiB)',
    min: 0,
    max: 4 * 1024 * 1024 * 1024,
  }).describe(
    'estimated bytes the parsed documents and parse errors kept for reuse may hold; the least recently used go first ([memory](#memory))',
  ),
  knownDocumentPath: flag({ name: 'KNOWN_DOCUMENT_PATH', default: true }).describe(
    "answer a plain POST of a document parsed, validated and compiled already without Yoga's per-request pipeline, with the same rules " +
      '([the known-document path](#the-known-document-path)); `false` sends every request through the pipeline',
  ),
});
