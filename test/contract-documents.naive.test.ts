import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createContractDocumentNaive } from './naive/contract-documents.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { expectedNumbers, runDocumentScenario } from './support/document-scenario.js';

// The same scenario as contract-documents.concurrency.test.ts, with the resolver's service
// swapped for the max() + 1 numbering: the scenario's checks must catch it.
vi.mock('../src/contracts/service.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../src/contracts/service.js')>()),
  createContractDocument: createContractDocumentNaive,
}));

describe('the concurrency scenario against the naive max() + 1 numbering', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: { DB_POOL_MAX: '5', DB_POOL_ACQUIRE_TIMEOUT_MS: '10000' } });
  });
  afterAll(() => backend.close());

  it('fails: requests collide on the unique number and tenants end up short', async () => {
    const result = await runDocumentScenario(backend, { tenants: 3, perTenant: 50 });
    const complete = [...result.numbersByTenant.values()].filter(
      (numbers) => JSON.stringify(numbers) === JSON.stringify(expectedNumbers(50)),
    ).length;
    console.log(`naive documents: ${result.failures.length} of ${result.requests} requests failed; ${complete} of 3 tenants complete`);
    expect(result.failures.length).toBeGreaterThan(0);
    expect(complete).toBeLessThan(3);
  });
});
