import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { FAIRNESS_ENV, runFairnessScenario } from './support/fairness-scenario.js';

describe('fairness: a tenant flooding the server is shed, the others are served', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend({ env: FAIRNESS_ENV });
  });
  afterAll(() => backend.close());

  it('serves tenant B without an error while tenant A floods, and sheds A with Retry-After', async ({ annotate }) => {
    const result = await runFairnessScenario(backend);
    await annotate(
      `tenant B alone: p50 ${result.alone.p50.toFixed(1)} ms, p95 ${result.alone.p95.toFixed(1)} ms; ` +
        `during A's flood: p50 ${result.duringFlood.p50.toFixed(1)} ms, p95 ${result.duringFlood.p95.toFixed(1)} ms; ` +
        `A's answers ${JSON.stringify(result.floodOutcomes)}`,
    );
    expect(result.victimErrors).toEqual([]);
    expect(result.floodOutcomes['TRY_AGAIN']).toBeGreaterThan(0);
    expect(result.floodOutcomes['OK']).toBeGreaterThan(0);
    expect(Object.keys(result.floodOutcomes).sort()).toEqual(['OK', 'TRY_AGAIN']);
    expect(result.floodRetryAfter.every((seconds) => Number(seconds) >= 1)).toBe(true);
  });
});
