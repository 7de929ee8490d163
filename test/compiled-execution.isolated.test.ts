import { GraphQLError, GraphQLScalarType, type ExecutionResult } from 'graphql';
import { createSchema, createYoga, type Plugin } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AppError, ErrorCode } from '../src/core/errors.js';
import { CompiledExecutions } from '../src/http/plugins/compiled-execution.js';
import { asOperator, asTenantAdmin, asUser, createTenant, gql, serveTestBackend, type ServedBackend } from './support/harness.js';

/**
 * A document the server has executed before runs compiled (graphql-jit): every answer must read
 * as the standard executor's, errors included (their messages, places, extensions and causes, on
 * which the error contract's masking turns), and a request error (variables that do not coerce)
 * is the executor's own.
 */

const compiles = vi.hoisted(() => ({ count: 0 }));
vi.mock('graphql-jit', async (importOriginal) => {
  const jit = await importOriginal<typeof import('graphql-jit')>();
  return {
    ...jit,
    compileQuery: (...args: Parameters<typeof jit.compileQuery>) => (compiles.count++, jit.compileQuery(...args)),
  };
});

const typeDefs = /* GraphQL */ `
  scalar Instant
  enum Tone {
    LOUD
    QUIET
  }
  type Item {
    id: ID!
    at: Instant!
    tone: Tone!
    missing: String!
    broken: String
    refused: String
    located: String
    badInstant: Instant
    slow: String
  }
  input AddInput {
    name: String!
    count: Int = 1
    tags: [String!]
    at: Instant
  }
  type Query {
    items(n: Int!): [Item!]!
    item: Item
    strictItem: Item!
  }
  type Mutation {
    add(input: AddInput!): String!
    addTwice(input: AddInput!): String!
  }
`;

const instant = new GraphQLScalarType({
  name: 'Instant',
  serialize: (value) => {
    const date = new Date(value as string);
    if (Number.isNaN(date.getTime())) throw new TypeError('not an instant');
    return date.toISOString();
  },
  parseValue: (value) => {
    if (typeof value !== 'string') throw new AppError(ErrorCode.badUserInput, 'Expected an instant');
    return new Date(value);
  },
});

const item = (id: number) => ({ id, at: '2026-10-01T03:00:00Z', tone: 'QUIET' });
const echo = (_root: unknown, { input }: { input: Record<string, unknown> }) =>
  JSON.stringify(Object.entries(input).map(([key, value]) => [key, value instanceof Date ? value.toISOString() : value]));

const schema = createSchema({
  typeDefs,
  resolvers: {
    Instant: instant,
    Query: {
      items: (_root: unknown, { n }: { n: number }) => Array.from({ length: n }, (_, i) => item(i)),
      item: () => item(7),
      strictItem: () => item(8),
    },
    Mutation: { add: echo, addTwice: async (...args: Parameters<typeof echo>) => echo(...args) },
    Item: {
      missing: () => null,
      broken: () => {
        throw new Error('a bug');
      },
      refused: () => {
        throw new AppError(ErrorCode.forbidden, 'not for you', { reason: 'test' });
      },
      located: (_item: unknown, _args: unknown, _ctx: unknown, info: { path: unknown }) => {
        throw new GraphQLError('placed', { path: [] as never, extensions: { code: 'NOT_FOUND', seen: String(!!info.path) } });
      },
      badInstant: () => 'never',
      slow: async () => 'late',
    },
  },
});

/**
 * What the error contract's masking reads of a cause: none (an error made on purpose), a GraphQLError,
 * an AppError (the client reads it), or anything else (a bug, masked; a value a scalar could not
 * serialize reaches it from graphql-jit as a plain Error with the thrown error's message).
 */
const causeKind = (cause: unknown) =>
  cause === undefined || cause === null
    ? 'none'
    : cause instanceof GraphQLError
      ? 'GraphQLError'
      : cause instanceof AppError
        ? 'AppError'
        : 'unexpected';

/** Every error of the execution as the error contract reads it, cause included (the body does not show it). */
function errorsSeen(seen: unknown[][]): Plugin {
  return {
    onExecute: () => ({
      onExecuteDone({ result }) {
        for (const error of (result as ExecutionResult).errors ?? []) {
          const cause = error.originalError;
          seen.push([error.message, error.path, error.locations, { ...error.extensions }, causeKind(cause)]);
        }
      },
    }),
  };
}

function server(compiled: boolean) {
  const seen: unknown[][] = [];
  const yoga = createYoga({
    schema,
    maskedErrors: false,
    logging: false,
    plugins: [...(compiled ? [new CompiledExecutions().plugin()] : []), errorsSeen(seen)],
  });
  const answer = async (query: string, variables?: unknown) => {
    seen.length = 0;
    const response = await yoga.fetch('http://test.local/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query, variables }),
    });
    // The text, not the parsed body: the answer's bytes, the order of its keys included.
    return { status: response.status, body: await response.text(), errors: [...seen] };
  };
  return answer;
}

const REQUESTS: [string, string, unknown?][] = [
  ['a list with scalars and enums', '{ items(n: 3) { id at tone __typename } }'],
  [
    'errors spread over lines, a null in a non-null field nulling its parent',
    `{
      item {
        id
        missing
      }
      again: item { broken refused located }
    }`,
  ],
  ['a null in a non-null field of a non-null root field', '{ strictItem { id missing } }'],
  ['a value a scalar cannot serialize, and an async field', '{ item { badInstant slow } }'],
  ['errors in a list', '{ items(n: 2) { id broken } }'],
  ['input coerced from variables, defaults applied', 'mutation ($input: AddInput!) { add(input: $input) }', { input: { name: 'a' } }],
  [
    'a single value coerced to a list, a custom scalar parsed',
    'mutation ($input: AddInput!) { add(input: $input) b: addTwice(input: $input) }',
    { input: { name: 'a', tags: 'one', at: '2026-01-01T00:00:00Z', count: null } },
  ],
  ['input written in the document', 'mutation { add(input: { name: "b", tags: ["x"] }) }'],
  ['variables that do not coerce', 'mutation ($input: AddInput!) { add(input: $input) }', { input: { count: 2 } }],
  ['a custom scalar that refuses its variable', 'mutation ($input: AddInput!) { add(input: $input) }', { input: { name: 'a', at: 5 } }],
  ['a variable of the wrong type', 'query ($n: Int!) { items(n: $n) { id } }', { n: 'three' }],
];

describe('a compiled execution answers as the standard executor', () => {
  const standard = server(false);
  const compiled = server(true);

  for (const [name, text, variables] of REQUESTS) {
    it(name, async () => {
      // A document of its own (the parser's cache hands the same text the same document).
      const query = `${text} # ${name}`;
      const expected = await standard(query, variables);
      expect(expected.status).toBeGreaterThan(0);
      const before = compiles.count;
      // The first run is the standard executor's; the later ones are compiled (when the operation compiles).
      for (let run = 0; run < 3; run++) expect({ run, ...(await compiled(query, variables)) }).toEqual({ run, ...expected });
      expect(compiles.count).toBe(before + 1);
    });
  }
});

describe('the server runs a known document compiled, with the same answers', () => {
  let backend: ServedBackend;
  const TENANT = 'compiled';
  beforeAll(async () => {
    backend = await serveTestBackend();
    await createTenant(backend, TENANT);
  });
  afterAll(() => backend.close());

  /** The answer without what differs from one request to the next. */
  const answerOf = async (query: string, variables: unknown, headers: Record<string, string>) => {
    const { status, text } = await gql(backend.url, query, variables as never, headers);
    return { status, text: text.replace(/"requestId":"[^"]*"/g, '"requestId":"…"') };
  };

  const cases: [string, string, unknown, () => Record<string, string>][] = [
    ['a query', '{ viewer { role tenantId } }', undefined, asOperator],
    [
      'a refusal by the field guard',
      'mutation { issueCoupon(input: { campaignId: "c" }) { status } }',
      undefined,
      () => asTenantAdmin(TENANT),
    ],
    [
      'an answer of the unit',
      'mutation ($input: IssueCouponInput!) { issueCoupon(input: $input) { status coupon { id } } }',
      { input: { campaignId: '00000000-0000-4000-8000-000000000000' } },
      () => asUser(TENANT),
    ],
    [
      'an input the unit refuses',
      'mutation ($input: IssueCouponInput!) { issueCoupon(input: $input) { status } }',
      { input: { campaignId: 'not a campaign id' } },
      () => asUser(TENANT),
    ],
    [
      'variables that do not coerce',
      'mutation ($input: IssueCouponInput!) { issueCoupon(input: $input) { status } }',
      { input: { campaignId: 5, extra: true } },
      () => asUser(TENANT),
    ],
  ];

  for (const [name, text, variables, headers] of cases) {
    it(name, async () => {
      const query = `${text} # ${name}`;
      const before = compiles.count;
      const first = await answerOf(query, variables, headers());
      for (let run = 1; run < 4; run++) expect({ run, ...(await answerOf(query, variables, headers())) }).toEqual({ run, ...first });
      expect(compiles.count).toBe(before + 1);
    });
  }
});
