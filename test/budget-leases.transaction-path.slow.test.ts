import { afterAll, beforeAll, describe, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { expectNothingStranded, runKilledLeaseHolder } from './support/lease-run.js';

// test/budget-leases.concurrency.test.ts with both server processes on the transaction path (their
// sessions lack the role's timeouts, as behind a pooler whose server connections predate them):
// the process killed (SIGKILL) holds a lease it took on that path, and the survivor, on that path
// too, issues its yen once the lease has expired. Slow: it starts two server processes.

describe('budget leases on the transaction path when the process holding one is killed', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it('issues the killed holder’s yen after the TTL, never exceeds the budget, strands nothing', async ({ annotate }) => {
    const result = await runKilledLeaseHolder(backend.databaseUrl, backend.sql, 'conditional', 'tx-killed', { transactionPath: true });
    await annotate(`leases on the transaction path, holder killed: ${JSON.stringify(result)}`);
    expectNothingStranded(result);
  });
});
