import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { runKilledLeaseHolder } from './support/lease-run.js';

// The run of budget-leases.concurrency.test.ts against leases that only their own process issues
// from and nobody gives back (test/naive/budget-leases.ts): the dead process's lease is stranded.

describe('budget leases, naive: each process issues only from its own', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it("strands the killed process's lease: the campaign refuses with budget left", async ({ annotate }) => {
    const result = await runKilledLeaseHolder(backend.databaseUrl, backend.sql, 'naive-leases', 'naive');
    await annotate(`naive leases, holder killed: ${JSON.stringify(result)}`);
    expect(result.coupons).toBeLessThan(100);
    expect(result.violations.length).toBeGreaterThan(0);
  });
});
