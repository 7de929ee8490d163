import { startWorkers } from '../../src/entry/worker/index.js';
import { LoadClient } from '../load/client.js';
import { runLoad, type LoadResult } from '../load/run.js';
import { checkoutScenario, type CheckoutScenarioOptions } from '../load/scenarios/checkout.js';
import { headerSessions } from '../load/scenarios/coupons.js';
import type { ServedBackend } from './harness.js';

/**
 * `npm run load --scenario checkout` against a backend of the test's own, small (8 members, 32
 * checkouts, 4 in flight), with the backend's background loops running as a server's do: its
 * reconciler settles what the provider left unknown while the invariant check waits for it.
 */
export async function runCheckoutLoad(backend: ServedBackend, runId: string, options: CheckoutScenarioOptions): Promise<LoadResult> {
  const workers = startWorkers(backend.services);
  const client = new LoadClient(backend.url, 4);
  try {
    return await runLoad({
      client,
      sessions: headerSessions(),
      scenario: checkoutScenario(runId, 32, { members: 8, ...options }),
      concurrency: 4,
      amount: { requests: 32 },
      sql: backend.sql,
    });
  } finally {
    client.close();
    await workers.stop();
  }
}

/** Lost answers settle quickly: the reconciler resends after 100 ms and looks every 50 ms. */
export const QUICK_RECONCILER = { PAYMENTS_TIMEOUT_MS: '2000', PAYMENTS_RECONCILE_AFTER_MS: '100', PAYMENTS_RECONCILE_INTERVAL_MS: '50' };
