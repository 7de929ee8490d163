import { afterAll, beforeAll, describe, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { expectNothingStranded, runKilledLeaseHolder } from './support/lease-run.js';

// Budget leases with a real server process killed (SIGKILL) while it holds a lease and serves
// issues; a second process then sells the campaign out. test/budget-leases.naive.test.ts runs the
// same against the design that strands the dead process's lease.

describe('budget leases when the process holding one is killed', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it('never exceeds the budget, strands nothing, and keeps the budget row and the leases in agreement', async ({ annotate }) => {
    const result = await runKilledLeaseHolder(backend.databaseUrl, backend.sql, 'conditional', 'killed');
    await annotate(`leases, holder killed: ${JSON.stringify(result)}`);
    // Every coupon of the budget was issued, and the survivor refused only what was beyond it.
    expectNothingStranded(result);
  });
});
