import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContractDocumentNaive } from './naive/contract-documents.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { expectedNumbers, runDocumentScenario } from './support/document-scenario.js';

// The same scenario as contract-documents.concurrency.test.ts, with the max() + 1 numbering
// standing in for the sequence row: the scenario's checks must catch it.

describe('the concurrency scenario against the naive max() + 1 numbering', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: { DB_POOL_MAX: '5', DB_POOL_ACQUIRE_TIMEOUT_MS: '10000' },
      standIns: { documentIssuing: { createContractDocument: createContractDocumentNaive } },
    });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('fails: requests collide on the unique number and tenants end up short', async ({ annotate }) => {
    const result = await runDocumentScenario(backend, { tenants: 3, perTenant: 50 });
    const complete = [...result.numbersByTenant.values()].filter(
      (numbers) => JSON.stringify(numbers) === JSON.stringify(expectedNumbers(50)),
    ).length;
    await annotate(`naive documents: ${result.failures.length} of ${result.requests} requests failed; ${complete} of 3 tenants complete`);
    expect(result.failures.length).toBeGreaterThan(0);
    expect(complete).toBeLessThan(3);
  });
});
