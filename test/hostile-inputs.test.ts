import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type GraphQLInputType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredScopes } from '../src/graphql/guards.js';
import type { AccessScope } from '../src/features/identity/access.js';
import {
  asOperator,
  asTenantAdmin,
  asUser,
  createContractRow,
  createTenant,
  createTestBackend,
  gql,
  type TestBackend,
} from './support/harness.js';

/**
 * Every argument of every root field gets hostile values: strings with NUL, lone surrogates,
 * 10,000 characters or only whitespace; numbers negative, zero, fractional or past 2^31; ids of
 * another tenant. Whatever the server answers, it is never INTERNAL_SERVER_ERROR (a client's
 * mistake is a 4xx with a code), a refused request writes no row, and another tenant's rows never
 * change.
 *
 * It catches a planted regression: with the NUL check taken out of src/http/plugins/string-inputs.ts, a
 * title holding "\0" reaches PostgreSQL, fails with 22021 and is answered INTERNAL_SERVER_ERROR,
 * and this test fails with that counterexample.
 */
const RUNS_PER_FIELD = 25;
const ACTOR_TENANT = 'hostile';
const OTHER_TENANT = 'hostile-other';

const HEADERS: Record<AccessScope, Record<string, string>> = {
  member: asUser(ACTOR_TENANT),
  tenantAdmin: asTenantAdmin(ACTOR_TENANT),
  operator: asOperator(),
};

interface Foreign {
  contractId: string;
  campaignId: string;
  objectiveId: string;
  /** Another tenant's coupon and order: checkout's couponId and order's id. */
  couponId: string;
  orderId: string;
}

function hostileStrings(foreign: Foreign) {
  return fc.oneof(
    fc.constantFrom(
      '',
      ' ',
      '\t\n  ',
      'a\u0000b',
      '\u0000',
      '\ud800',
      'x\udc00y',
      'é'.repeat(10_000),
      'x'.repeat(10_000),
      foreign.contractId,
      foreign.campaignId,
      foreign.objectiveId,
      'welcome',
      '10000000',
      '-1',
      "'; drop table tenants; --",
    ),
    fc.string({ maxLength: 80 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
  );
}

const hostileInts = fc.oneof(
  fc.constantFrom(-1, 0, 1, 0.5, -0.5, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), 2 ** 53, 1_000_000_001, 64, 65, 100, 101, 500, 501),
  fc.integer(),
  fc.double({ noNaN: true }),
);

function hostileUuids(foreign: Foreign) {
  return fc.oneof(fc.constantFrom(foreign.contractId, foreign.couponId, foreign.orderId), fc.uuid(), hostileStrings(foreign));
}

/** Instants at and past the ends of what JavaScript, PostgreSQL and a four-digit year hold, impossible dates, and any string. */
function hostileDateTimes(foreign: Foreign) {
  return fc.oneof(
    fc.constantFrom(
      '-271821-04-20T00:00:00.000Z',
      '+275760-09-13T00:00:00.000Z',
      '0000-12-31T23:59:59.999Z',
      '0001-01-01T00:00:00.000Z',
      '9999-12-31T23:59:59.999Z',
      '+010000-01-01T00:00:00.000Z',
      '2026-02-30T00:00:00Z',
      '2026-09-19T00:00:00+09:00',
    ),
    fc.date({ noInvalidDate: true }).map((date) => date.toISOString()),
    hostileStrings(foreign),
  );
}

/** A hostile value for an input type; optional fields and arguments are sometimes left out. */
function hostileValue(type: GraphQLInputType, foreign: Foreign): fc.Arbitrary<unknown> {
  if (isNonNullType(type)) return hostileValue(type.ofType, foreign);
  if (isListType(type)) return fc.array(hostileValue(type.ofType, foreign), { maxLength: 3 });
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields());
    return fc.record(Object.fromEntries(fields.map((field) => [field.name, hostileValue(field.type, foreign)])), {
      requiredKeys: fields.filter((field) => isNonNullType(field.type)).map((field) => field.name),
    });
  }
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((value) => value.name), 'NOT_A_VALUE');
  switch (type.name) {
    case 'Int':
    case 'Float':
      return hostileInts;
    case 'UUID':
      return hostileUuids(foreign);
    case 'DateTime':
      return hostileDateTimes(foreign);
    case 'Boolean':
      return fc.boolean();
    default:
      return hostileStrings(foreign);
  }
}

/** A request for the field with every argument as a variable; optional ones may be missing. */
function hostileRequest(field: GraphQLField<unknown, unknown>, operation: 'query' | 'mutation', foreign: Foreign) {
  const definitions = field.args.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const selection = isObjectType(getNamedType(field.type)) ? ' { __typename }' : '';
  const query = `${operation}${definitions ? `(${definitions})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
  const variables = fc.record(Object.fromEntries(field.args.map((arg) => [arg.name, hostileValue(arg.type, foreign)])), {
    requiredKeys: field.args.filter((arg) => isNonNullType(arg.type)).map((arg) => arg.name),
  });
  return { query, variables };
}

describe('hostile inputs to every argument: a 4xx code, never an internal error, nothing written', () => {
  let backend: TestBackend;
  let foreign: Foreign;
  let countRows: (tenant?: string) => Promise<number>;

  beforeAll(async () => {
    backend = await createTestBackend();
    await createTenant(backend, ACTOR_TENANT);
    await createTenant(backend, OTHER_TENANT);
    await createContractRow(backend, ACTOR_TENANT);
    const contractId = await createContractRow(backend, OTHER_TENANT);
    await backend.sql.query(
      `insert into campaigns (tenant_id, id, name, discount_yen, budget_yen) values ($1, 'welcome', 'Welcome', 500, 5000), ($2, 'theirs', 'Theirs', 500, 5000)`,
      [ACTOR_TENANT, OTHER_TENANT],
    );
    await backend.sql.query(
      `insert into campaign_budget_slots (tenant_id, campaign_id, slot, budget_yen) values ($1, 'welcome', 0, 5000), ($2, 'theirs', 0, 5000)`,
      [ACTOR_TENANT, OTHER_TENANT],
    );
    await backend.sql.query(`insert into huddle_sessions (tenant_id, objective_id) values ($1, 'their-objective')`, [OTHER_TENANT]);
    // Their member's coupon, held by their pending order: neither may be read, spent or settled from here.
    const coupon = await backend.sql.query<{ id: string }>(
      `insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at) values ($1, 'theirs', 'member-1', '2026-10', 500, now()) returning id`,
      [OTHER_TENANT],
    );
    const couponId = coupon.rows[0]!.id;
    const orderId = '0d0d0d0d-0d0d-4d0d-8d0d-0d0d0d0d0d0d';
    await backend.sql.query(
      `insert into orders (tenant_id, id, member_id, status, amount_yen, discount_yen, charged_yen, coupon_id, created_at)
       values ($1, $2, 'member-1', 'PENDING_PAYMENT', 1000, 500, 500, $3, now())`,
      [OTHER_TENANT, orderId, couponId],
    );
    await backend.sql.query('update coupons set held_by_order_id = $2 where tenant_id = $1 and id = $3', [OTHER_TENANT, orderId, couponId]);
    foreign = { contractId, campaignId: 'theirs', objectiveId: 'their-objective', couponId, orderId };
    const { rows } = await backend.sql.query<{ table_name: string }>(
      `select table_name from information_schema.columns
        where table_schema = 'public' and column_name = 'tenant_id' order by table_name`,
    );
    // Every table with tenant rows, counted in one statement: all of them, or one tenant's.
    const total = rows.map((row) => `(select count(*) from ${row.table_name} where $1::text is null or tenant_id = $1)`).join(' + ');
    countRows = async (tenant) => (await backend.sql.query<{ n: number }>(`select (${total})::int as n`, [tenant ?? null])).rows[0]!.n;
  });
  afterAll(() => backend.close());

  it('holds for every root field of the schema', async ({ annotate }) => {
    const schema = backend.app.schema;
    const roots = [
      ...Object.values(schema.getQueryType()!.getFields()).map((field) => ({ operation: 'query' as const, field })),
      ...Object.values(schema.getMutationType()!.getFields()).map((field) => ({ operation: 'mutation' as const, field })),
    ].filter(({ field }) => field.args.length > 0);
    expect(roots.length).toBeGreaterThan(12);
    const answers: Record<string, number> = {};
    for (const { operation, field } of roots) {
      const scope = declaredScopes(field)![0]!;
      const { query, variables } = hostileRequest(field, operation, foreign);
      await fc.assert(
        fc.asyncProperty(variables, async (values) => {
          const before = { all: await countRows(), theirs: await countRows(OTHER_TENANT) };
          const response = await gql(backend.app.fetch, query, values, HEADERS[scope]);
          const codes = (response.body.errors ?? []).map((error) => String(error.extensions?.['code']));
          for (const code of codes.length ? codes : ['OK']) answers[code] = (answers[code] ?? 0) + 1;
          expect(codes).not.toContain('INTERNAL_SERVER_ERROR');
          expect(response.status).toBeLessThan(500);
          expect(await countRows(OTHER_TENANT)).toBe(before.theirs);
          if (codes.length > 0) expect(await countRows()).toBe(before.all);
        }),
        { numRuns: RUNS_PER_FIELD },
      );
    }
    await annotate(`hostile inputs: ${roots.length} fields x ${RUNS_PER_FIELD} runs; answers ${JSON.stringify(answers)}`);
  });

  it('refuses a value nested 12,000 levels deep, declared or not, on /graphql and /actions, before it can exhaust the stack', async () => {
    // Written out by hand: JSON.stringify itself would overflow on such a value.
    const deep = `${'['.repeat(12_000)}${']'.repeat(12_000)}`;
    const post = async (path: string, body: string, headers: Record<string, string>) => {
      const response = await backend.app.fetch(
        new Request(`http://test.local${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }),
      );
      const answer = (await response.json()) as {
        errors?: { extensions: Record<string, unknown> }[];
        extensions?: Record<string, unknown>;
      };
      return { status: response.status, extensions: answer.errors?.[0]?.extensions ?? answer.extensions };
    };
    const before = await countRows();
    const undeclared = await post('/graphql', `{"query":"{ viewer { role } }","variables":{"y":${deep}}}`, HEADERS.member);
    expect(undeclared).toMatchObject({ status: 400, extensions: { code: 'BAD_USER_INPUT', field: expect.stringMatching(/^y\[0\]/) } });
    const createContract = 'mutation ($input: CreateContractInput!) { createContract(input: $input) { contract { id } } }';
    const declared = await post(
      '/graphql',
      `{"query":${JSON.stringify(createContract)},"variables":{"input":{"title":${deep}}}}`,
      HEADERS.member,
    );
    expect(declared).toMatchObject({ status: 400, extensions: { code: 'BAD_USER_INPUT' } });
    const session = JSON.stringify(HEADERS.member);
    const action = await post(
      '/actions',
      `{"action":{"name":"createContract"},"input":{"input":{"title":${deep}}},"session_variables":${session}}`,
      {},
    );
    expect(action).toMatchObject({ status: 400, extensions: { code: 'BAD_USER_INPUT' } });
    expect(await countRows()).toBe(before);
  });
});
