import { afterAll } from 'vitest';
import { endProcessesOfThisFile } from './processes.js';

// A setup file (vitest.config.ts): its afterAll runs after every hook of the test file, so what a
// hook that timed out or threw left running ends here, before the next file starts.
afterAll(async () => {
  const ended = await endProcessesOfThisFile();
  if (ended.length > 0) console.warn(`ended ${ended.length} processes this file left running:\n  ${ended.join('\n  ')}`);
}, 60_000);
