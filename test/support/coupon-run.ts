import { LoadClient } from '../load/client.js';
import { runLoad, type LoadResult } from '../load/run.js';
import { checkCouponInvariants, couponLoad, headerSessions, referenceScenario, type InvariantReport } from '../load/scenarios/coupons.js';
import { serveOverHttp, type TestBackend } from './harness.js';

export interface CouponRunResult extends LoadResult {
  invariants: InvariantReport;
}

/**
 * The limit of a test that runs the reference scenario: its 1,800 requests take a few seconds on a
 * quiet machine and have taken 90 s at 20 requests/s on two cores that other work kept busy. The
 * limit is there to catch a hang, not to time the run.
 */
export const REFERENCE_SCENARIO_TIMEOUT_MS = 600_000;

/**
 * The reference scenario over real HTTP at `concurrency` clients, in a tenant of its own, through
 * the load tool's runner; the invariants are counted in SQL afterwards.
 */
export async function runReferenceScenario(backend: TestBackend, concurrency: number, seed = concurrency): Promise<CouponRunResult> {
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, concurrency);
  const scenario = referenceScenario(`c${concurrency}-${seed}`);
  const requests = scenario.members.length * scenario.campaigns.length * scenario.sends;
  try {
    const result = await runLoad({
      client,
      sessions: headerSessions(),
      scenario: couponLoad(scenario, requests),
      concurrency,
      amount: { requests },
      sql: null,
    });
    return { ...result, invariants: await checkCouponInvariants(backend.sql, scenario, result.outcomes['ISSUED'] ?? 0) };
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
