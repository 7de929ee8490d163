import { group, wholeNumber } from './kinds.js';

/** Rows deleted by the background loops once they are this old. */
export const retentionVariables = group('Retention', {
  outboxSentHours: wholeNumber({ name: 'OUTBOX_RETENTION_HOURS', default: 168, min: 0, max: 87_600 }).describe(
    'sent events are deleted once they were sent this long ago (pending and dead ones never)',
  ),
  huddleEndedHours: wholeNumber({ name: 'HUDDLE_RETENTION_HOURS', default: 168, min: 0, max: 87_600 }).describe(
    'ended huddle sessions and their participants are deleted once they ended this long ago',
  ),
  intervalMs: wholeNumber({ name: 'RETENTION_INTERVAL_MS', default: 60_000, min: 10, max: 86_400_000 }).describe(
    'pause between retention passes (at once while a batch came back full)',
  ),
  batchSize: wholeNumber({ name: 'RETENTION_BATCH_SIZE', default: 1_000, min: 1, max: 100_000 }).describe(
    'rows (sessions, with their participants) one retention statement deletes ([table growth](#table-growth-and-retention))',
  ),
});
