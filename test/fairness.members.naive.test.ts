import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantOnlyAdmission } from './naive/admission.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, MOST_WAITED_BEHIND, runMemberFairnessScenario } from './support/fairness-scenario.js';

// The same scenario as fairness.members.test.ts with admission fair between tenants but first come
// inside a tenant: the flooder fills the tenant's line, and the check on its tenant-mates must catch it.

describe('the member fairness scenario against one first-come line per tenant', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: FAIRNESS_ENV,
      standIns: { admissionPolicy: (options) => new TenantOnlyAdmission(options) },
    });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('fails: the flooder’s tenant-mates are turned away with the flooder', async ({ annotate }) => {
    const result = await runMemberFairnessScenario(backend);
    await annotate(
      `first come inside a tenant: the same tenant's member's errors ${JSON.stringify(result.victimErrors['sameTenantMember'])}, ` +
        `its admin's ${JSON.stringify(result.victimErrors['sameTenantAdmin'])}, another tenant's member's ${JSON.stringify(result.victimErrors['otherTenantMember'])}`,
    );
    expect(result.victimErrors['sameTenantMember']!.length + result.victimErrors['sameTenantAdmin']!.length).toBeGreaterThan(0);
  });
});

// The same line with room for every flooding request: nobody is turned away, and the check on what
// the tenant-mates waited behind must catch it instead.
describe('the member fairness scenario against one first-come line per tenant that sheds nobody', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({
      env: { ...FAIRNESS_ENV, TENANT_QUEUE_MAX: '64' },
      standIns: { admissionPolicy: (options) => new TenantOnlyAdmission(options) },
    });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('fails: the flooder’s tenant-mates wait behind every flooding request in the line', async ({ annotate }) => {
    const { floodServedDuring } = await runMemberFairnessScenario(backend);
    const most = (waits: number[]) => Math.max(...waits);
    await annotate(
      `first come inside a tenant, no shedding: the most of the flooder's operations one request waited behind: ` +
        `the same tenant's member ${most(floodServedDuring.sameTenantMember)}, its admin ${most(floodServedDuring.sameTenantAdmin)}, ` +
        `another tenant's member ${most(floodServedDuring.otherTenantMember)} (the bound: ${MOST_WAITED_BEHIND})`,
    );
    expect(Math.max(most(floodServedDuring.sameTenantMember), most(floodServedDuring.sameTenantAdmin))).toBeGreaterThan(MOST_WAITED_BEHIND);
  });
});
