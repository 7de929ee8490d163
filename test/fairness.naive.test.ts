import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FifoAdmission } from './naive/admission.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, runFairnessScenario } from './support/fairness-scenario.js';

// The same scenario as fairness.test.ts with one first-come line for all tenants: the victim's
// requests land in a line the flooder keeps full, and the check on the victim must catch it.
vi.mock('../src/http/admission.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../src/http/admission.js')>()),
  FairAdmission: FifoAdmission,
}));

describe('the fairness scenario against one first-come line', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: FAIRNESS_ENV });
  });
  afterAll(() => backend.close());

  it('fails: tenant B is turned away with the flooder', async () => {
    const result = await runFairnessScenario(backend);
    console.log(`naive line: tenant B's errors ${JSON.stringify(result.victimErrors)}; A's answers ${JSON.stringify(result.floodOutcomes)}`);
    expect(result.victimErrors.length).toBeGreaterThan(0);
  });
});
