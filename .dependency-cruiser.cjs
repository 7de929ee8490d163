/**
 * The direction of the project's dependencies (docs/design.md §2): neutral modules at the bottom,
 * then the database, the features, the services, GraphQL, HTTP, and the entry points on top.
 * `npm run lint` checks them; a module may import only from layers below its own. Each rule's
 * name and comment stand in docs/design.md §2 word for word, and test/lint.test.ts plants a
 * violation of each in a copy of the tree to show that it fires.
 */
const NEUTRAL = '^src/(config|config-error|config-kinds|config-shape|config-table|database-url|http-url|jwt-config|errors|logger|clock|request-scope|tracing)\\.ts$';
const FEATURES = '^src/(tenants|contracts|coupons|huddles|audit|idempotency|outbox|adoption|bookkeeping|identity|checkout|payments)/';
const SERVICES = '^src/(services\\.ts$|admission\\.ts$|metrics/)';

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No import cycle, type-only imports included.', from: {}, to: { circular: true } },
    {
      name: 'neutral-imports-nothing-above',
      severity: 'error',
      comment: 'Configuration, errors, logging, tracing, the clock and the request scope sit below everything.',
      from: { path: NEUTRAL },
      to: { path: '^src/', pathNot: NEUTRAL },
    },
    {
      name: 'db-below-features',
      severity: 'error',
      comment: 'The database layer knows no feature, no service, no GraphQL and no HTTP.',
      from: { path: '^src/db/' },
      to: { path: '^src/', pathNot: [NEUTRAL, '^src/db/'] },
    },
    {
      name: 'features-below-services',
      severity: 'error',
      comment: 'Features hold their SQL and rules; the services, GraphQL and HTTP are put on top of them, never the reverse.',
      from: { path: FEATURES },
      to: { path: '^src/(services\\.ts$|admission\\.ts$|metrics/|graphql/|http/|worker/|cli/|process/|backend\\.ts$|main\\.ts$)' },
    },
    {
      name: 'features-know-no-graphql',
      severity: 'error',
      comment: 'Features import nothing of graphql, graphql-yoga or @pothos/*: the GraphQL layer hands them plain values.',
      from: { path: FEATURES },
      to: { path: '(^|/)node_modules/(graphql|graphql-yoga|@graphql-yoga/[^/]+|@pothos/[^/]+)/' },
    },
    {
      name: 'services-below-graphql',
      severity: 'error',
      comment: 'The process-wide services, admission and metrics know nothing of GraphQL, HTTP or the entry points.',
      from: { path: SERVICES },
      to: { path: '^src/(graphql/|http/|worker/|cli/|process/|backend\\.ts$|main\\.ts$)' },
    },
    {
      name: 'graphql-below-http',
      severity: 'error',
      comment: 'The schema and its runners know nothing of HTTP or of the entry points.',
      from: { path: '^src/graphql/' },
      to: { path: '^src/(http/|worker/|cli/|process/|backend\\.ts$|main\\.ts$)' },
    },
    {
      name: 'process-below-entry-points',
      severity: 'error',
      comment: 'The process bootstrap and the opening of the database serve every entry point and know none of them.',
      from: { path: '^src/process/' },
      to: { path: '^src/(worker/|cli/|backend\\.ts$|main\\.ts$)' },
    },
    {
      name: 'http-below-entry-points',
      severity: 'error',
      comment: 'The HTTP surface knows nothing of the entry points that start it.',
      from: { path: '^src/http/' },
      to: { path: '^src/(worker/|cli/|process/|backend\\.ts$|main\\.ts$)' },
    },
    {
      name: 'dev-tooling-only-where-it-starts',
      severity: 'error',
      comment: 'The embedded PostgreSQL is development tooling: only the entry points that start it and the opening of the database import src/dev/.',
      from: { path: '^src/', pathNot: '^src/(dev/|process/|cli/|backend\\.ts$|main\\.ts$)' },
      to: { path: '^src/dev/' },
    },
    {
      name: 'dev-imports-only-neutral',
      severity: 'error',
      comment: 'Development tooling imports nothing of the server but the neutral modules.',
      from: { path: '^src/dev/' },
      to: { path: '^src/', pathNot: [NEUTRAL, '^src/dev/'] },
    },
    {
      name: 'client-stands-alone',
      severity: 'error',
      comment: 'The typed client ships to frontends: it imports nothing of the server.',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
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
