import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveTestBackend, UNLIMITED_ANONYMOUS, type ServedBackend } from './support/harness.js';

/**
 * The graphql-http server audits for the GraphQL over HTTP spec, against /graphql over a real
 * socket and in process (the Fetch path): every path a request can take. Every audit must pass: a
 * warning counts as a failure.
 */

describe('GraphQL over HTTP (graphql-http audits)', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend({ env: UNLIMITED_ANONYMOUS });
  });
  afterAll(() => backend.close());

  const inProcess = (input: RequestInfo | URL, init?: RequestInit) => backend.app.fetch(new Request(input, init));
  for (const [path, fetchFn] of [
    ['on the socket', fetch],
    ['in process', inProcess],
  ] as const) {
    const audits = serverAudits({ url: () => backend.url, fetchFn });
    it(`${path}: has ${audits.length} audits to run`, () => {
      expect(audits.length).toBeGreaterThan(30);
    });
    for (const audit of audits) {
      it(`${path}: ${audit.name}`, async () => {
        const result = await audit.fn();
        expect(result.status === 'ok' ? 'ok' : `${result.status}: ${result.reason}`).toBe('ok');
      });
    }
  }

  // The audits' own coercion case declares a variable it never uses, which validation refuses
  // before coercion runs: here the variable is used, so CoerceVariableValues itself refuses it.
  const coercionFailure = JSON.stringify({
    query: 'mutation Pay($amount: Int!) { checkout(input: { amountYen: $amount, paymentMethod: "pm_card_visa" }) { status } }',
    variables: { amount: 2_147_483_648 },
  });
  for (const [path, send] of [
    ['on the socket', (init: RequestInit) => fetch(backend.url, init)],
    ['in process', (init: RequestInit) => backend.app.fetch(new Request(backend.url, init))],
  ] as const) {
    it(`${path}: a variable that fails coercion is 200 to application/json and 400 to application/graphql-response+json, BAD_USER_INPUT either way`, async () => {
      for (const [accept, status] of [
        ['application/json', 200],
        ['application/graphql-response+json', 400],
      ] as const) {
        const response = await send({
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept,
            'x-hasura-role': 'user',
            'x-hasura-tenant-id': 'acme',
            'x-hasura-user-id': 'm',
          },
          body: coercionFailure,
        });
        const body = (await response.json()) as { data?: unknown; errors: { message: string; extensions: { code: string } }[] };
        expect({ accept, status: response.status }).toEqual({ accept, status });
        expect(body.data).toBeUndefined();
        expect(body.errors[0]!.message).toMatch(/Variable "\$amount" got invalid value 2147483648/);
        expect(body.errors[0]!.extensions.code).toBe('BAD_USER_INPUT');
      }
    });
  }
});
