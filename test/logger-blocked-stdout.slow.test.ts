import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { endProcessesOfThisFile, spawnRecorded } from './support/processes.js';

/**
 * The logger flushes its buffered lines every second. While stdout is blocked (a log collector
 * that stalls), a flush waits for the stream's 'drain' with a listener: one pending flush at a
 * time, not one more listener every second for as long as the block lasts.
 */

/** A process whose stdout nobody reads: it logs past the pipe's capacity, then reports the stream's listeners each second. */
const BLOCKED_LOGGER = `
import pino from 'pino';
import { createLogger } from './src/core/logger.ts';
const log = createLogger('info');
const line = 'x'.repeat(1_000);
for (let i = 0; i < 4_000; i++) log.info({ line }, 'filling stdout');
const stream = log[pino.symbols.streamSym];
setInterval(() => console.error(JSON.stringify({ drain: stream.listenerCount('drain'), error: stream.listenerCount('error') })), 1_000);
`;

afterAll(async () => {
  await endProcessesOfThisFile();
});

describe('the logger with stdout blocked', () => {
  it('keeps one flush pending, never a listener more every second', async () => {
    // stdout is a pipe this test never reads: once its buffer is full every write waits.
    const child = spawnRecorded(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', BLOCKED_LOGGER], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const reports: { drain: number; error: number }[] = [];
    for await (const line of createInterface({ input: child.stderr! })) {
      if (!line.startsWith('{')) continue;
      reports.push(JSON.parse(line) as { drain: number; error: number });
      if (reports.length === 8) break;
    }
    child.kill('SIGKILL');
    // Eight seconds blocked: eight flushes were due. Before the fix the counts read 1, 2, 3 … 8.
    expect(reports).toHaveLength(8);
    expect(Math.max(...reports.map((r) => r.drain))).toBeLessThanOrEqual(1);
    // The stream's own error listener, and the pending flush's: the same in every report.
    expect(new Set(reports.map((r) => r.error)).size).toBe(1);
  });
});
