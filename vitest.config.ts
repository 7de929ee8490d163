import { defineConfig } from 'vitest/config';

/** The trials that start a cluster, a second PostgreSQL, a production build or a clone, or take minutes. */
const SLOW = 'test/**/*.slow.test.ts';
/** Files that replace a module (vi.mock): only a module graph of their own sees the replacement. */
const ISOLATED = 'test/**/*.isolated.test.ts';

export default defineConfig({
  resolve: {
    // Node resolves `graphql` (no "exports" map) to its CommonJS build, so libraries loaded by Node
    // get that copy; Vite would pick index.mjs for our files. Two copies of graphql refuse to mix.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    // After each file's own hooks: ends what it started and left running (test/support/processes.ts).
    setupFiles: ['test/support/end-processes.ts'],
    // The default output, and the figures each test measured (test/support/figures-reporter.ts).
    reporters: ['default', './test/support/figures-reporter.ts'],
    // A bound for a hang, not a measure of speed: on a shared 2-core machine at a load of 20, a test
    // that starts server processes, or sends hundreds of requests to a real PostgreSQL, takes minutes.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
    // Files, and the tests inside each, run in a new order every time: no test may lean on another's rows.
    sequence: { shuffle: { files: true, tests: true } },
    // `npm test` runs the fast projects, `npm run test:slow` the slow one, `npm run test:all` all.
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: [SLOW, ISOLATED, 'test/fixtures/**'],
          // The files of a worker share one module graph: loading the app (graphql, Yoga, Pothos,
          // Kysely) once per worker instead of once per file was most of the suite's wall time.
          // Nothing the app keeps at module level may carry a test's state to the next file.
          isolate: false,
        },
      },
      { extends: true, test: { name: 'fast-isolated', include: [ISOLATED], exclude: ['test/fixtures/**'] } },
      { extends: true, test: { name: 'slow', include: [SLOW], exclude: ['test/fixtures/**'] } },
    ],
  },
});
