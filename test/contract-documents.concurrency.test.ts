import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { expectedNumbers, runDocumentScenario } from './support/document-scenario.js';

const TENANTS = 3;
const PER_TENANT = 50;
const POOL_MAX = 5;

describe(`createContractDocument: ${TENANTS} tenants x ${PER_TENANT} concurrent requests, pool of ${POOL_MAX}`, () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { DB_POOL_MAX: String(POOL_MAX), DB_POOL_ACQUIRE_TIMEOUT_MS: '10000' } });
  });
  afterAll(() => backend.close());

  it('answers every request and leaves each tenant exactly 10000000..10000049', async ({ annotate }) => {
    const result = await runDocumentScenario(backend, { tenants: TENANTS, perTenant: PER_TENANT });
    await annotate(
      `documents: ${result.requests} requests over HTTP, pool ${POOL_MAX}, ${result.wallMs.toFixed(0)} ms wall, ` +
        `${result.failures.length} failed`,
    );
    expect(result.failures).toEqual([]);
    expect(result.numbersByTenant.size).toBe(TENANTS);
    for (const numbers of result.numbersByTenant.values()) expect(numbers).toEqual(expectedNumbers(PER_TENANT));
  });
});
