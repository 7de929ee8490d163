import { group, wholeNumber } from './kinds.js';

/** How long a stored response is replayed, and the passes that delete expired keys. */
export const idempotencyVariables = group('Idempotency keys', {
  ttlHours: wholeNumber({ name: 'IDEMPOTENCY_TTL_HOURS', default: 24, min: 1, max: 24 * 365 }).describe(
    'how long a stored response is replayed',
  ),
  cleanupIntervalMs: wholeNumber({ name: 'IDEMPOTENCY_CLEANUP_INTERVAL_MS', default: 60_000, min: 10, max: 86_400_000 }).describe(
    'pause between passes deleting expired keys',
  ),
});
