import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, runMemberFairnessScenario } from './support/fairness-scenario.js';

/** How much slower than a member of another tenant a member of the flooder's own tenant may be served. */
const SAME_TENANT_P95_FACTOR = 3;

describe('fairness inside a tenant: a member flooding is shed, the tenant’s other members and its admin are served', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: FAIRNESS_ENV });
  });
  afterAll(() => backend.close());

  it('serves the flooder’s tenant-mates within 3x of another tenant’s member, without an error, and sheds the flooder with Retry-After', async ({
    annotate,
  }) => {
    const result = await runMemberFairnessScenario(backend);
    const line = (name: string, s: { p50: number; p95: number }) => `${name} p50 ${s.p50.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms`;
    await annotate(
      `during one member's flood: ${line('another tenant’s member', result.otherTenantMember)}; ` +
        `${line('a member of the same tenant', result.sameTenantMember)}; ${line('the tenant’s admin', result.sameTenantAdmin)}; ` +
        `the flooder's answers ${JSON.stringify(result.floodOutcomes)}`,
    );
    expect(result.victimErrors).toEqual({ sameTenantMember: [], sameTenantAdmin: [], otherTenantMember: [] });
    expect(result.sameTenantMember.p95).toBeLessThanOrEqual(SAME_TENANT_P95_FACTOR * result.otherTenantMember.p95);
    expect(result.sameTenantAdmin.p95).toBeLessThanOrEqual(SAME_TENANT_P95_FACTOR * result.otherTenantMember.p95);
    expect(result.floodOutcomes['TRY_AGAIN']).toBeGreaterThan(0);
    expect(Object.keys(result.floodOutcomes).sort()).toEqual(['OK', 'TRY_AGAIN']);
    expect(result.floodRetryAfter.every((seconds) => Number(seconds) >= 1)).toBe(true);
  });
});
