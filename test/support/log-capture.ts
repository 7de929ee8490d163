import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/core/logger.js';

/** A pino destination that keeps every line, to read what the server logged. */
export function captureLog(level = 'info'): { lines: Record<string, unknown>[]; logger: Logger } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger(level, stream) };
}
