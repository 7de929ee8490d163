import { embeddedConnectionString } from '../../dev/embedded-postgres.js';
import { DEFAULT_DATA_DIR } from '../../process/open-database.js';
import { bootstrap, run } from '../../process/bootstrap.js';

/**
 * `npm run -s db:url`: the connection string of the database this project uses, alone on stdout,
 * so that `psql "$(npm run -s db:url)"` opens it: DATABASE_URL when set, else the embedded one.
 */
run(async () => {
  const { config } = bootstrap({ servesHttp: false });
  if (config.database.url !== null) {
    console.log(config.database.url);
    return;
  }
  const dataDir = config.embeddedPostgres.dataDir ?? DEFAULT_DATA_DIR;
  const embedded = await embeddedConnectionString(dataDir, config.embeddedPostgres.port);
  if (!embedded) {
    console.error(`No embedded database in ${dataDir} yet: npm start creates it (EMBEDDED_PG_DATA_DIR names another folder).`);
    process.exitCode = 2;
    return;
  }
  if (!embedded.running && config.embeddedPostgres.port === 0) {
    console.error(
      'The embedded PostgreSQL is not running now, and its port is chosen at each start (EMBEDDED_PG_PORT=0): npm start serves it.',
    );
    process.exitCode = 2;
    return;
  }
  if (!embedded.running) console.error('The embedded PostgreSQL is not running now: npm start serves it.');
  console.log(embedded.url);
});
