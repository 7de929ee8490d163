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
});
