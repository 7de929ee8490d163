/**
 * The direction of the project's dependencies (docs/design.md §2). The layers are folders of src/,
 * listed once here, bottom first: a module may import from its own layer and the layers below it,
 * never from one above. The rules below are made from this list; `npm run lint` checks them, and
 * test/lint.test.ts plants a violation of each in a copy of the tree to show that it fires and
 * holds docs/design.md §2 (the rules word for word, the table of layers) and the README's layout to it.
 */
const LAYERS = [
  { folder: 'core', name: 'core', holds: 'configuration, errors, logging, tracing, the clock and the request scope' },
  { folder: 'db', name: 'database', holds: 'the pool, the transaction runners, the driver and the migrator' },
  { folder: 'features', name: 'features', holds: 'the features, a folder each, with their SQL and rules' },
  { folder: 'services', name: 'services', holds: 'the process-wide services, admission and metrics' },
  { folder: 'graphql', name: 'GraphQL', holds: 'the schema, and the mutations and reads it hands to the runners' },
  { folder: 'http', name: 'HTTP', holds: 'the HTTP surface' },
  { folder: 'process', name: 'process', holds: 'the process bootstrap and the opening of the database' },
  { folder: 'entry', name: 'entry points', holds: 'the entry points' },
];

/**
 * The files a command starts (package.json's scripts): nothing imports them, so that starting one
 * never starts another's side effects. test/lint.test.ts checks that every script's file is here.
 */
const ENTRY_POINTS = [
  'entry/main.ts',
  'entry/worker/main.ts',
  'entry/cli/adopt.ts',
  'entry/cli/db-url.ts',
  'entry/cli/outbox-requeue.ts',
  'entry/cli/reconcile.ts',
];

const folderPath = (folders) => `^src/(${folders.join('|')})/`;
const escape = (file) => file.replace(/[.]/g, '\\.');

/** One rule per layer but the top: it imports nothing of the layers above it. */
const layerRules = LAYERS.slice(0, -1).map((layer, index) => {
  const above = LAYERS.slice(index + 1);
  return {
    name: `${layer.folder}-imports-nothing-above`,
    severity: 'error',
    comment: `src/${layer.folder}/ (${layer.holds}) imports nothing of ${above.map((upper) => `src/${upper.folder}/`).join(', ')}.`,
    from: { path: folderPath([layer.folder]) },
    to: { path: folderPath(above.map((upper) => upper.folder)) },
  };
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No import cycle, type-only imports included.', from: {}, to: { circular: true } },
    ...layerRules,
    {
      name: 'entry-points-imported-by-none',
      severity: 'error',
      comment: `What a command starts (${ENTRY_POINTS.map((file) => `src/${file}`).join(', ')}) is imported by no module.`,
      from: { path: '^src/' },
      to: { path: `^src/(${ENTRY_POINTS.map(escape).join('|')})$` },
    },
    {
      name: 'features-know-no-graphql',
      severity: 'error',
      comment: 'Features import nothing of graphql, graphql-yoga or @pothos/*: the GraphQL layer hands them plain values.',
      from: { path: '^src/features/' },
      to: { path: '(^|/)node_modules/(graphql|graphql-yoga|@graphql-yoga/[^/]+|@pothos/[^/]+)/' },
    },
    {
      name: 'dev-tooling-only-where-it-starts',
      severity: 'error',
      comment: 'The embedded PostgreSQL is development tooling: only the process bootstrap and the entry points import src/dev/.',
      from: { path: '^src/', pathNot: '^src/(dev|process|entry)/' },
      to: { path: '^src/dev/' },
    },
    {
      name: 'dev-imports-only-core',
      severity: 'error',
      comment: 'Development tooling imports nothing of the server but src/core/.',
      from: { path: '^src/dev/' },
      to: { path: '^src/', pathNot: '^src/(core|dev)/' },
    },
    {
      name: 'client-stands-alone',
      severity: 'error',
      comment: 'The typed client ships to frontends: it imports nothing of the server.',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
    },
    {
      name: 'no-module-outside-a-layer',
      severity: 'error',
      comment: `Every module of src/ lives in a layer's folder (${LAYERS.map((layer) => `src/${layer.folder}/`).join(', ')}), src/dev/ or src/client/.`,
      from: { path: '^src/', pathNot: folderPath([...LAYERS.map((layer) => layer.folder), 'dev', 'client']) },
      to: {},
    },
    {
      name: 'src-never-imports-tests',
      severity: 'error',
      comment: 'Nothing in src/ imports from test/: the naive twins stand in from the tests.',
      from: { path: '^src/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
