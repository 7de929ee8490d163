import { folder, group, portOrAny } from './kinds.js';

/** The embedded PostgreSQL of development and tests (used when DATABASE_URL is unset). */
export const embeddedPostgresVariables = group('The embedded PostgreSQL (development and tests)', {
  port: portOrAny({ name: 'EMBEDDED_PG_PORT', default: 54_329 }).describe(
    'port of the embedded PostgreSQL (loopback only); 0 picks an unused one at each start (`npm run -s db:url` finds it while it runs)',
  ),
  dataDir: folder({ name: 'EMBEDDED_PG_DATA_DIR', shown: '`.data/postgres`' }).describe(
    'data folder of the embedded PostgreSQL; one running server per folder (a second `npm start` on it stops with a message naming the first)',
  ),
  sharedDir: folder({ name: 'EMBEDDED_PG_SHARED_DIR', shown: '`/var/lib/mutation-backend`' }).describe(
    'as root: PostgreSQL runs as the `postgres` user; where that user cannot enter the project (a clone under `/root`, a `mktemp -d` folder), ' +
      'a copy of the binaries per version and the data folder (linked from `EMBEDDED_PG_DATA_DIR`) live here',
  ),
});
