import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startBackend } from '../src/server.js';
import { LoadClient, runReleasedTogether } from '../test/load/client.js';

const log = createLogger(process.env.LL ?? 'warn');
const config = loadConfig({ PORT: '4556', EMBEDDED_PG_PORT: '54556', EMBEDDED_PG_DATA_DIR: '/tmp/prof-pg2/data', RUN_WORKERS: 'false' });
const backend = await startBackend({ config, log, ephemeral: true });
const client = new LoadClient(backend.url, 32);
await client.open();
for (const q of ['{ viewer { role } }', '{ viewer { role } }', '{ viewer { role } }', '{ viewer { role } }']) {
  const n = 5000;
  const t = performance.now();
  await runReleasedTogether(Array.from({ length: n }, () => () => client.graphql(q, {}, { 'x-hasura-role': 'user' })), 32);
  console.log(q, (n / (performance.now() - t) * 1000).toFixed(0), 'rps');
}
client.close();
await backend.stop();
