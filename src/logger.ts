import pino, { type Logger } from 'pino';
import { currentRequestScope } from './http/request-scope.js';

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
      return scope ? { requestId: scope.requestId, ...(scope.operation ? { operation: scope.operation } : {}) } : {};
    },
    redact: {
      paths: [
        'authorization',
        'headers.authorization',
        'headers["x-action-secret"]',
        'headers.cookie',
        '*.password',
        'password',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
