import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FifoAdmission } from './naive/admission.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, runFairnessScenario } from './support/fairness-scenario.js';

// The same scenario as fairness.test.ts with one first-come line for all tenants: the victim's
// requests land in a line the flooder keeps full, and the check on the victim must catch it.

describe('the fairness scenario against one first-come line', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: FAIRNESS_ENV, standIns: { admissionPolicy: (options) => new FifoAdmission(options) } });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('fails: tenant B is turned away with the flooder', async ({ annotate }) => {
    const result = await runFairnessScenario(backend);
    await annotate(
      `naive line: tenant B's errors ${JSON.stringify(result.victimErrors)}; A's answers ${JSON.stringify(result.floodOutcomes)}`,
    );
    expect(result.victimErrors.length).toBeGreaterThan(0);
  });
});
