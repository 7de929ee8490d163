import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateCampaignDocument } from './generated/graphql.js';
import {
  asOperator,
  asTenantAdmin,
  asUser,
  callAction,
  createTenant,
  gqlOk,
  serveTestBackend,
  type Headers,
  type ServedBackend,
} from './support/harness.js';

/**
 * The known-document path (src/http/known-document-path.ts) answers a plain POST of a document
 * parsed, validated and compiled already without Yoga's per-request pipeline. Each case here is sent
 * in rounds that should read the same: the first round meets the document new (the standard
 * executor), the second compiles it inside the pipeline, the third is answered by the path. Every
 * round's answers are compared, status, headers and body, with only what differs between any two
 * requests (ids, dates, the wait left) masked.
 */

const TENANT = 'known-path';
const ISSUE = 'mutation ($input: IssueCouponInput!) { issueCoupon(input: $input) { status } }';
const CREATE_CONTRACT = 'mutation ($input: CreateContractInput!) { createContract(input: $input) { contract { title } } }';
const CREATE_CAMPAIGN = 'mutation ($input: CreateCampaignInput!) { createCampaign(input: $input) { campaign { id } } }';

interface Exchange {
  body: Record<string, unknown>;
  headers: Headers;
}

/** What is compared of an answer: its status, its headers but the per-request ones, its body with ids and waits masked. */
async function comparable(response: Response) {
  const headers = Object.fromEntries(
    [...response.headers]
      .filter(([name]) => !['date', 'x-request-id', 'connection', 'keep-alive', 'content-length'].includes(name))
      .map(([name, value]) => [name, name === 'retry-after' ? '<seconds>' : value]),
  );
  const body = (await response.text())
    .replace(/"requestId":"[^"]*"/g, '"requestId":"<id>"')
    .replace(/"retryAfterMs":\d+/g, '"retryAfterMs":"<ms>"');
  return { status: response.status, headers, body };
}

describe('the known-document path answers as the pipeline does', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    // One write per second after a burst of two: a member's third write in a round is refused (TRY_AGAIN, Retry-After).
    backend = await serveTestBackend({ env: { MEMBER_WRITE_RATE: '1', MEMBER_WRITE_BURST: '2', MAX_QUERY_COST: '500' } });
    await createTenant(backend, TENANT, 1_000_000);
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'known', name: 'Known', discountYen: 100, budgetYen: 1_000_000 } },
      asTenantAdmin(TENANT),
    );
  });
  afterAll(() => backend.close());

  const post = ({ body, headers }: Exchange) =>
    fetch(backend.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const answeredByPath = async () => (await backend.services.metrics.knownDocumentPath.get()).values[0]?.value ?? 0;

  let members = 0;
  let keys = 0;
  /** Each case: the exchanges of one round (a new member or key per round where the answer would otherwise change). */
  const cases: [string, () => Exchange[]][] = [
    ['a query', () => [{ body: { query: '{ viewer { role tenantId } }' }, headers: asOperator() }]],
    ['a query without a session (the anonymous share)', () => [{ body: { query: '{ viewer { role } }' }, headers: {} }]],
    [
      'a coupon issued',
      () => [{ body: { query: ISSUE, variables: { input: { campaignId: 'known' } } }, headers: asUser(TENANT, `member-${members++}`) }],
    ],
    [
      'an AppError (no such campaign), masked and under the contract',
      () => [{ body: { query: ISSUE, variables: { input: { campaignId: 'nowhere' } } }, headers: asUser(TENANT, `member-${members++}`) }],
    ],
    [
      'a guard refusal (a member creating a campaign)',
      () => [
        {
          body: { query: CREATE_CAMPAIGN, variables: { input: { id: 'x', name: 'X', discountYen: 1, budgetYen: 1 } } },
          headers: asUser(TENANT, `member-${members++}`),
        },
      ],
    ],
    [
      'variables that do not coerce (answered by the standard executor)',
      () => [
        { body: { query: ISSUE, variables: { input: { campaignId: 'known', extra: 1 } } }, headers: asUser(TENANT, `member-${members++}`) },
      ],
    ],
    [
      'a refusal before execution: an Idempotency-Key that is not one',
      () => [
        {
          body: { query: ISSUE, variables: { input: { campaignId: 'known' } }, operationName: null },
          headers: { ...asUser(TENANT, `member-${members++}`), 'idempotency-key': 'é'.repeat(3) },
        },
      ],
    ],
    [
      'a refusal before execution: the cost limit, with the variables',
      () => [{ body: { query: 'query ($n: Int!) { contracts(first: $n) { id } }', variables: { n: 600 } }, headers: asUser(TENANT) }],
    ],
    [
      'a refusal before execution: a string PostgreSQL cannot store',
      () => [{ body: { query: CREATE_CONTRACT, variables: { input: { title: 'nul \u0000 here' } } }, headers: asUser(TENANT) }],
    ],
    [
      'the write budget: a third write at once is TRY_AGAIN with Retry-After',
      () => {
        const member = asUser(TENANT, `writer-${members++}`);
        const issue = { query: ISSUE, variables: { input: { campaignId: 'known' } }, operationName: null };
        return [
          { body: issue, headers: member },
          { body: issue, headers: member },
          { body: issue, headers: member },
        ];
      },
    ],
    [
      'an idempotent replay, marked Idempotent-Replayed',
      () => {
        const keyed = { ...asUser(TENANT, `keyed-${members++}`), 'idempotency-key': `known-${keys++}` };
        const body = { query: `${ISSUE} # keyed`, variables: { input: { campaignId: 'known' } } };
        return [
          { body, headers: keyed },
          { body, headers: keyed },
        ];
      },
    ],
  ];

  /** Sends the rounds; each answer is the first round's, and the last round was the path's, whole. */
  async function sameInEveryRound(round: () => Exchange[]) {
    const rounds = [];
    let byPath = 0;
    for (let i = 0; i < 4; i++) {
      const before = await answeredByPath();
      const answers = [];
      for (const exchange of round()) answers.push(await comparable(await post(exchange)));
      byPath = (await answeredByPath()) - before;
      rounds.push(answers);
    }
    expect(byPath).toBe(round().length);
    for (const later of rounds.slice(1)) expect(later).toEqual(rounds[0]);
    return rounds[0]!;
  }

  for (const [name, round] of cases) {
    it(`${name}: the same answer new, compiled, and by the path`, async () => {
      await sameInEveryRound(round);
    });
  }

  it('a Hasura action: the same answer new, compiled, and by the path, its session from the body', async () => {
    const rounds = [];
    for (let i = 0; i < 4; i++) {
      const before = await answeredByPath();
      const answers = [];
      for (const campaignId of ['known', 'nowhere']) {
        const member = { 'x-hasura-role': 'user', 'x-hasura-tenant-id': TENANT, 'x-hasura-user-id': `action-${members++}` };
        answers.push(await comparable(await callAction(backend.app.fetch, 'issueCoupon', { campaignId }, member)));
      }
      rounds.push({ answers, byPath: (await answeredByPath()) - before });
    }
    // The issue's payload is the action's answer: its ids and dates differ from call to call.
    const shapes = rounds.map(({ answers }) =>
      answers.map((answer) => ({
        ...answer,
        body: answer.body.replace(/"(id|memberId|issuedAt|expiresAt|month)":"[^"]*"/g, '"$1":"<v>"'),
      })),
    );
    for (const later of shapes.slice(1)) expect(later).toEqual(shapes[0]);
    expect(rounds.at(-1)!.byPath).toBe(2);
  });

  it('an unexpected error (a column gone from under the query): masked, its cause in no answer', async () => {
    await backend.sql.query('alter table contracts rename column tenant_id to tenant_gone');
    try {
      const [answer] = await sameInEveryRound(() => [{ body: { query: '{ contracts(first: 1) { id title } }' }, headers: asUser(TENANT) }]);
      expect(answer!.body).toContain('"code":"INTERNAL_SERVER_ERROR"');
      expect(answer!.body).not.toContain('tenant_gone');
      expect(answer!.body).not.toContain('does not exist');
    } finally {
      await backend.sql.query('alter table contracts rename column tenant_gone to tenant_id');
    }
  });

  it('leaves to the pipeline what it does not take: an Origin, another Accept, more than the three parameters, a new document', async () => {
    const known = { query: '{ viewer { role } } # left to the pipeline' };
    for (let i = 0; i < 3; i++) await post({ body: known, headers: asOperator() });
    const before = await answeredByPath();
    const sent: [string, RequestInit][] = [
      [
        'an Origin',
        {
          headers: { 'content-type': 'application/json', accept: 'application/json', origin: 'http://localhost:3000', ...asOperator() },
          body: JSON.stringify(known),
        },
      ],
      [
        'Accept: application/graphql-response+json',
        {
          headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...asOperator() },
          body: JSON.stringify(known),
        },
      ],
      ['no Accept', { headers: { 'content-type': 'application/json', ...asOperator() }, body: JSON.stringify(known) }],
      [
        'extensions',
        {
          headers: { 'content-type': 'application/json', accept: 'application/json', ...asOperator() },
          body: JSON.stringify({ ...known, extensions: {} }),
        },
      ],
      [
        'a new document',
        {
          headers: { 'content-type': 'application/json', accept: 'application/json', ...asOperator() },
          body: JSON.stringify({ query: '{ viewer { role } } # new' }),
        },
      ],
    ];
    for (const [what, init] of sent) expect((await fetch(backend.url, { method: 'POST', ...init })).status, what).toBe(200);
    // Parameters of the wrong type are the pipeline's to refuse: a 400 with its code, never a crash of the path.
    const json = { 'content-type': 'application/json', accept: 'application/json', ...asOperator() };
    for (const [what, body] of [
      ['variables as a list', { ...known, variables: [1] }],
      ['operationName as a number', { ...known, operationName: 5 }],
      ['a batch', [known]],
      ['not JSON', '{"query":'],
    ] as const) {
      const response = await fetch(backend.url, {
        method: 'POST',
        headers: json,
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      expect(response.status, what).toBe(400);
      expect(JSON.stringify(await response.json()), what).toContain('"code":"BAD_USER_INPUT"');
    }
    expect(await answeredByPath()).toBe(before);
  });
});
