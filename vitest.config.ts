import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Node resolves `graphql` (no "exports" map) to its CommonJS build, so libraries loaded by Node
    // get that copy; Vite would pick index.mjs for our files. Two copies of graphql refuse to mix.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // The default output, and the figures each test measured (test/support/figures-reporter.ts).
    reporters: ['default', './test/support/figures-reporter.ts'],
    // Concurrency suites run hundreds of requests against a real PostgreSQL on a shared 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    // Files, and the tests inside each, run in a new order every time: no test may lean on another's rows.
    sequence: { shuffle: { files: true, tests: true } },
  },
});
