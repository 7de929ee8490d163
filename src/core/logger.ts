import pino, { type Logger } from 'pino';
import { currentRequestScope } from './request-scope.js';
import { currentTraceIds } from './tracing.js';

export type { Logger };

/**
 * JSON lines on stdout. The redaction list is the last line of defence: call sites log ids,
 * codes and timings, never payloads, but a header object that slips in still loses its secrets.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Every line logged while serving a request names it, so a client's error leads to its log lines.
    mixin() {
      const scope = currentRequestScope();
      // The trace beside the request id: a log line leads to its trace, and the trace to its lines.
      const ids = currentTraceIds();
      return {
        ...(scope ? { requestId: scope.requestId, ...(scope.operation ? { operation: scope.operation } : {}) } : {}),
        ...ids,
      };
    },
    redact: {
      paths: ['authorization', 'headers.authorization', 'headers["x-action-secret"]', 'headers.cookie', '*.password', 'password'],
      censor: '[redacted]',
    },
  };
  if (destination) return pino(options, destination);
  // Lines are gathered into 4 KiB writes instead of one system call per line, and flushed at
  // least every second; shutdown flushes the rest (see onShutdown).
  const logger = pino(options, pino.destination({ dest: 1, sync: false, minLength: 4096 }));
  flushPeriodically(logger, FLUSH_INTERVAL_MS);
  return logger;
}

const FLUSH_INTERVAL_MS = 1_000;

/**
 * One flush at a time: each waits for the stream's 'drain', so while stdout is blocked (a log
 * collector that stalls, a reader that went away) a flush every second would leave one more
 * listener on the stream every second until it drains.
 */
function flushPeriodically(logger: Logger, everyMs: number) {
  let flushing = false;
  const flushed = () => {
    flushing = false;
  };
  setInterval(() => {
    if (flushing) return;
    flushing = true;
    logger.flush(flushed);
  }, everyMs).unref();
}
