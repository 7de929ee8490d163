/**
 * The direction of the project's dependencies (docs/design.md §2): neutral modules at the bottom,
 * then the database, the features, the services, GraphQL, HTTP, and the entry points on top.
 * `npm run lint` checks them; a module may import only from layers below its own.
 */
const NEUTRAL = '^src/(config|config-error|database-url|jwt-config|errors|logger|clock|request-scope|replaceable|tracing)\\.ts$';
const FEATURES = '^src/(tenants|contracts|coupons|huddles|audit|idempotency|outbox|adoption|bookkeeping|identity)/';

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No import cycle, type-only imports included.', from: {}, to: { circular: true } },
    {
      name: 'neutral-imports-nothing-above',
      severity: 'error',
      comment: 'Configuration, errors, logging, the clock, the request scope and Replaceable sit below everything.',
      from: { path: NEUTRAL },
      to: { path: '^src/', pathNot: NEUTRAL },
    },
    {
      name: 'db-below-features',
      severity: 'error',
      comment: 'The database layer knows no feature, no GraphQL and no HTTP.',
      from: { path: '^src/db/' },
      to: { path: '^src/', pathNot: [NEUTRAL, '^src/db/'] },
    },
    {
      name: 'features-below-graphql',
      severity: 'error',
      comment: 'Features hold their SQL and rules; GraphQL and HTTP are put on top of them, never the reverse.',
      from: { path: FEATURES },
      to: { path: '^src/(graphql|http|services|metrics|admission|worker|cli|server|main)' },
    },
    {
      name: 'graphql-below-http',
      severity: 'error',
      comment: 'The schema and its runners know nothing of HTTP or of the entry points.',
      from: { path: '^src/graphql/' },
      to: { path: '^src/(http|worker|cli|server|main)' },
    },
    {
      name: 'http-below-entry-points',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: '^src/(worker|cli|server|main)' },
    },
    {
      name: 'client-stands-alone',
      severity: 'error',
      comment: 'The typed client ships to frontends: it imports nothing of the server.',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
    },
    { name: 'src-never-imports-tests', severity: 'error', from: { path: '^src/' }, to: { path: '^test/' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
