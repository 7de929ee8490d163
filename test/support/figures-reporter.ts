import type { Reporter, TestCase, Vitest } from 'vitest/node';

/**
 * Prints the figures tests measure (latencies, counts, sizes), which they record with the test
 * context's `annotate(message)`, under the test's name as each test ends. Vitest's default reporter
 * shows annotations only for a failed test; this one shows them for every other, so that every run,
 * CI's included, shows what was measured. Registered beside the default one in vitest.config.ts.
 */
export default class FiguresReporter implements Reporter {
  private vitest!: Vitest;

  onInit(vitest: Vitest) {
    this.vitest = vitest;
  }

  onTestCaseResult(testCase: TestCase) {
    // A failed test's annotations are printed with its error by the default reporter.
    if (testCase.result().state === 'failed') return;
    const annotations = testCase.annotations();
    if (annotations.length === 0) return;
    const lines = annotations.map((annotation) => `  ${annotation.message}`);
    this.vitest.logger.log(`figures | ${testCase.module.relativeModuleId} > ${testCase.fullName}\n${lines.join('\n')}`);
  }
}
