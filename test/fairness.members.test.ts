import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, MOST_WAITED_BEHIND, runMemberFairnessScenario } from './support/fairness-scenario.js';

const mostWaitedBehind = (waits: Record<string, number[]>) =>
  Object.fromEntries(Object.entries(waits).map(([who, counts]) => [who, Math.max(...counts)]));

describe('fairness inside a tenant: a member flooding is shed, the tenant’s other members and its admin are served', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: FAIRNESS_ENV });
  });
  afterAll(() => backend.close());

  it('serves the flooder’s tenant-mates as another tenant’s member, behind a few of the flooder’s operations, without an error, and sheds the flooder with Retry-After', async ({
    annotate,
  }) => {
    const result = await runMemberFairnessScenario(backend);
    const line = (name: string, s: { p50: number; p95: number }) => `${name} p50 ${s.p50.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms`;
    await annotate(
      `during one member's flood: ${line('another tenant’s member', result.otherTenantMember)}; ` +
        `${line('a member of the same tenant', result.sameTenantMember)}; ${line('the tenant’s admin', result.sameTenantAdmin)}; ` +
        `the flooder's answers ${JSON.stringify(result.floodOutcomes)}; ` +
        `the most of the flooder's operations one request waited behind ${JSON.stringify(mostWaitedBehind(result.floodServedDuring))}`,
    );
    expect(result.victimErrors).toEqual({ sameTenantMember: [], sameTenantAdmin: [], otherTenantMember: [] });
    // Counted in the flooder's operations answered meanwhile, not in milliseconds: a busy machine slows everyone alike.
    for (const waits of Object.values(result.floodServedDuring)) expect(Math.max(...waits)).toBeLessThanOrEqual(MOST_WAITED_BEHIND);
    expect(result.floodOutcomes['TRY_AGAIN']).toBeGreaterThan(0);
    expect(Object.keys(result.floodOutcomes).sort()).toEqual(['OK', 'TRY_AGAIN']);
    expect(result.floodRetryAfter.every((seconds) => Number(seconds) >= 1)).toBe(true);
  });
});
