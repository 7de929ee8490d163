import { ConfigError, loadConfig, type AppConfig, type LoadOptions } from '../core/config.js';
import { createLogger, type Logger } from '../core/logger.js';
import { startTracing, stopTracing } from '../core/tracing.js';
import { loadEnvFile } from './env-file.js';

/**
 * Configuration and logger for an entry point, from the environment and the `.env` file; a bad
 * variable ends it with exit 2. `envFile`: the file read, if any.
 */
export function bootstrap(options: LoadOptions = {}): { config: AppConfig; log: Logger; envFile: string | null } {
  try {
    const envFile = loadEnvFile();
    const config = loadConfig(process.env, options);
    // Before anything that makes spans; a no-op unless an exporter is configured.
    startTracing(config.tracing);
    return { config, log: createLogger(config.process.logLevel), envFile };
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`Configuration error: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
}

/**
 * Runs `main`, printing a failure's message (not a stack trace) and exiting 1, or 2 for an error
 * that says the setup must change first (its `exitCode`).
 */
export function run(main: () => Promise<void>): void {
  // A promise nobody awaited failed: that is a bug. Say so and stop rather than run on in an unknown state.
  process.on('unhandledRejection', (reason) => {
    console.error('unhandled promise rejection:', reason);
    process.exit(1);
  });
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    const exitCode = (error as { exitCode?: unknown } | null)?.exitCode;
    process.exit(exitCode === 2 ? 2 : 1);
  });
}

/**
 * Why a process stops: a signal (SIGTERM from an orchestrator, SIGINT from Ctrl-C at a terminal),
 * or, for an HTTP process of the cluster, its primary: `replaced` (its successor listens) or
 * `instance` (the whole server stops, as after a SIGTERM to a single process).
 */
export type StopReason = 'SIGTERM' | 'SIGINT' | 'replaced' | 'instance';

/**
 * Calls `stop` once on SIGINT or SIGTERM (or when the returned function is called), then exits
 * with its code after logs are flushed.
 */
export function onShutdown(log: Logger, stop: (reason: StopReason) => Promise<void>): (reason: StopReason) => void {
  let stopping = false;
  const shutdown = (reason: StopReason) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: reason }, 'shutting down: draining work in flight');
    // pino writes asynchronously: exiting at once would drop the last lines.
    const exit = (code: number) => log.flush(() => process.exit(code));
    // The spans of the last requests go out before the process does.
    stop(reason)
      .then(stopTracing)
      .then(() => {
        log.info('stopped');
        exit(0);
      })
      .catch((error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        exit(1);
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  return shutdown;
}
