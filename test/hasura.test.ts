import { readFile } from 'node:fs/promises';
import { buildSchema, isInterfaceType, isUnionType } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { schema } from '../src/graphql/schema.js';
import { actionsGraphql, actionsYaml, actionTimeoutSeconds } from '../scripts/hasura-actions.js';
import { createContractRow, createTestBackend, type TestBackend } from './support/harness.js';

const read = (path: string) => readFile(new URL(`../${path}`, import.meta.url), 'utf8');
const SECRET = 'hasura-action-secret-0123456789';

describe('Hasura metadata (npm run hasura:metadata)', () => {
  it('the committed files are what the schema generates', async () => {
    const stale = (file: string) => `${file} differs from what the schema generates: run npm run codegen (or npm run hasura:metadata)`;
    expect(await read('schema/hasura/actions.graphql'), stale('schema/hasura/actions.graphql')).toBe(actionsGraphql(schema));
    expect(await read('schema/hasura/actions.yaml'), stale('schema/hasura/actions.yaml')).toBe(
      actionsYaml(schema, loadConfig({}).requests.deadlineMs),
    );
  });

  it('declares every public mutation in SDL Hasura accepts: every type declared, no interfaces or unions', () => {
    const sdl = buildSchema(actionsGraphql(schema));
    const mutations = Object.keys(schema.getMutationType()!.getFields()).sort();
    expect(Object.keys(sdl.getMutationType()!.getFields()).sort()).toEqual(mutations);
    const types = Object.values(sdl.getTypeMap()).filter((t) => !t.name.startsWith('__'));
    expect(types.filter((t) => isInterfaceType(t) || isUnionType(t))).toEqual([]);
    expect(types.map((t) => t.name)).toEqual(
      expect.arrayContaining(['UUID', 'DateTime', 'IssueCouponStatus', 'HuddleStatus', 'ContractDocument']),
    );
  });

  it('makes each action synchronous, on /actions, with the secret from the environment, client headers forwarded, and a timeout between the deadline and 30 s', () => {
    const deadlineMs = loadConfig({}).requests.deadlineMs;
    const yaml = actionsYaml(schema, deadlineMs);
    const blocks = yaml.split('\n  - name: ').slice(1);
    expect(blocks).toHaveLength(Object.keys(schema.getMutationType()!.getFields()).length);
    for (const block of blocks) {
      expect(block).toContain('kind: synchronous');
      expect(block).toContain("handler: '{{ACTION_BASE_URL}}/actions'");
      expect(block).toContain('forward_client_headers: true');
      expect(block).toContain('value_from_env: ACTION_SECRET');
      expect(block).toMatch(/permissions:\n(\s+- role: (user|admin|operator)\n?)+/);
      const timeout = Number(/timeout: (\d+)/.exec(block)![1]);
      expect(timeout * 1000).toBeGreaterThan(deadlineMs);
      expect(timeout).toBeLessThan(30);
    }
    expect(actionTimeoutSeconds(25_000)).toBe(29);
    expect(yaml).toMatch(/- name: issueCoupon[\s\S]*?permissions:\n\s+- role: user\n(?!\s+- role)/);
    expect(yaml).toMatch(/- name: createTenant[\s\S]*?permissions:\n\s+- role: operator\n(?!\s+- role)/);
  });
});

describe("Hasura's action requests, replayed", () => {
  let backend: TestBackend;
  let contractId: string;
  const post = (body: unknown) =>
    backend.app.fetch(
      new Request('http://hasura.local/actions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-action-secret': SECRET, 'user-agent': 'hasura-graphql-engine/v2' },
        body: JSON.stringify(body),
      }),
    );

  beforeAll(async () => {
    backend = await createTestBackend({ env: { ACTION_SECRET: SECRET } });
    await backend.sql.query("insert into tenants (id, name) values ('hasura-t', 'Hasura tenant')");
    contractId = await createContractRow(backend, 'hasura-t');
  });
  afterAll(() => backend.close());

  it('answers the documented body shape with the payload object', async () => {
    const response = await post({
      action: { name: 'createContractDocument' },
      input: { input: { contractId } },
      session_variables: { 'x-hasura-role': 'user', 'x-hasura-user-id': '42', 'x-hasura-tenant-id': 'hasura-t' },
      request_query: `mutation { createContractDocument(input: {contractId: "${contractId}"}) { document { docNumber } } }`,
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ document: { contractId, docNumber: expect.any(Number) } });
  });

  it('accepts a body without request_query and session variables in mixed case', async () => {
    const response = await post({
      action: { name: 'createContractDocument' },
      input: { input: { contractId } },
      session_variables: { 'X-Hasura-Role': 'user', 'X-HASURA-USER-ID': '42', 'x-Hasura-Tenant-Id': 'hasura-t' },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ document: { contractId, docNumber: expect.any(Number) } });
  });

  it('takes an operator action without a tenant and an argument-less admin action', async () => {
    const tenant = await post({
      action: { name: 'createTenant' },
      input: { input: { id: 'from-hasura', name: 'From Hasura', monthlyCapYen: 3000 } },
      session_variables: { 'x-hasura-role': 'operator' },
      request_query: null,
    });
    expect(await tenant.json()).toMatchObject({ tenant: { id: 'from-hasura', monthlyCapYen: 3000 } });
    const cleanup = await post({
      action: { name: 'cleanupHuddles' },
      input: {},
      session_variables: { 'x-hasura-role': 'admin', 'x-hasura-tenant-id': 'hasura-t' },
    });
    expect(await cleanup.json()).toEqual({ participantsRemoved: 0, sessionsEnded: 0 });
  });

  it('answers a refused role with a 4xx Hasura shows: message and a string code in extensions', async () => {
    const response = await post({
      action: { name: 'createTenant' },
      input: { input: { id: 'nope', name: 'Nope' } },
      session_variables: { 'x-hasura-role': 'user', 'x-hasura-user-id': '42', 'x-hasura-tenant-id': 'hasura-t' },
    });
    expect(response.status).toBe(403);
    const body = (await response.json()) as { message: string; extensions: { code: unknown } };
    expect(body.message).toMatch(/platform operator/);
    expect(body.extensions.code).toBe('FORBIDDEN');
  });
});
