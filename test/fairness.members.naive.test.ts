import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantOnlyAdmission } from './naive/admission.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, runMemberFairnessScenario } from './support/fairness-scenario.js';

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
