import { bootstrap, onShutdown, run } from './cli/bootstrap.js';
import { isDevMode } from './config.js';
import { DEMO_HEADERS } from './http/graphiql.js';
import { startBackend } from './server.js';

run(async () => {
  const { config, log } = bootstrap();
  if (isDevMode(config)) {
    log.warn('dev mode: no ACTION_SECRET and no JWT_SECRET, so x-hasura-* headers are trusted as sent');
  }
  const backend = await startBackend({ config, log });
  const base = `http://localhost:${backend.http.port}`;
  console.log(`
  GraphQL and GraphiQL: ${backend.url}
  Health: ${base}/health   Ready: ${base}/ready
  Hasura Actions:       POST ${base}/actions
  Background workers:   ${config.runWorkers ? 'running in this process' : 'off (RUN_WORKERS=false)'}
${isDevMode(config) ? `  Headers for GraphiQL (dev mode):\n  ${JSON.stringify(DEMO_HEADERS)}\n` : ''}`);
  onShutdown(log, () => backend.stop());
});
