import { LoadClient } from '../load/client.js';
import { headerSessions, referenceScenario, runCouponScenario, type CouponRunResult } from '../load/scenarios/coupons.js';
import { serveOverHttp, type TestBackend } from './harness.js';

/** The reference scenario over real HTTP at `concurrency` clients, in a tenant of its own. */
export async function runReferenceScenario(backend: TestBackend, concurrency: number, seed = concurrency): Promise<CouponRunResult> {
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, concurrency);
  try {
    await client.open();
    return await runCouponScenario({
      client,
      sql: backend.sql,
      scenario: referenceScenario(`c${concurrency}-${seed}`),
      sessions: headerSessions(),
      concurrency,
      seed,
    });
  } finally {
    client.close();
    await server.close();
  }
}

export function describeRun(label: string, result: CouponRunResult): string {
  return (
    `${label}: ${result.requests} requests in ${result.wallMs.toFixed(0)} ms, ` +
    `${result.requestsPerSecond.toFixed(0)} req/s, p99 ${result.latency.p99.toFixed(1)} ms; ` +
    `outcomes ${JSON.stringify(result.outcomes)}; violations ${result.invariants.violations.length}` +
    (result.invariants.violations.length ? ` ${JSON.stringify(result.invariants.violations)}` : '')
  );
}
