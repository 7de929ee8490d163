import { group, wholeNumber } from './kinds.js';

/** Stale-huddle cleanup. */
export const huddleVariables = group('Huddles', {
  cleanupIntervalMs: wholeNumber({ name: 'HUDDLE_CLEANUP_INTERVAL_MS', default: 10_000, min: 10, max: 3_600_000 }).describe(
    'pause between stale-huddle cleanup passes',
  ),
  staleAfterMs: wholeNumber({ name: 'HUDDLE_STALE_AFTER_MS', default: 30_000, min: 100, max: 86_400_000 }).describe(
    'a member whose last heartbeat is older is removed by cleanup',
  ),
  cleanupBatchSize: wholeNumber({ name: 'HUDDLE_CLEANUP_BATCH_SIZE', default: 100, min: 1, max: 10_000 }).describe(
    'objectives one cleanup transaction looks at',
  ),
});
