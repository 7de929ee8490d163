import { ConfigError, isDevMode, loadConfig } from './config.js';
import { DEMO_HEADERS } from './http/graphiql.js';
import { createLogger } from './logger.js';
import { startBackend } from './server.js';

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`Configuration error: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
  const log = createLogger(config.logLevel);
  if (isDevMode(config)) {
    log.warn('dev mode: no ACTION_SECRET and no JWT_SECRET, so x-hasura-* headers are trusted as sent');
  }
  const backend = await startBackend({ config, log });

  console.log(`
  GraphQL and GraphiQL: ${backend.url}
  Health: http://localhost:${backend.http.port}/health   Ready: http://localhost:${backend.http.port}/ready
  Hasura Actions:       POST http://localhost:${backend.http.port}/actions
${isDevMode(config) ? `  Headers for GraphiQL (dev mode):\n  ${JSON.stringify(DEMO_HEADERS)}\n` : ''}`);

  // pino writes asynchronously: exiting at once would drop the last lines.
  const exitAfterFlush = (code: number) => log.flush(() => process.exit(code));
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining requests in flight');
    backend
      .stop()
      .then(() => {
        log.info('stopped');
        exitAfterFlush(0);
      })
      .catch((error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        exitAfterFlush(1);
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
