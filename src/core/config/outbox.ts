import { z } from 'zod';
import { custom, duration, group, httpUrl, refuse, wholeNumber } from './kinds.js';

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes. */
const notifySecret = z.string().transform((raw, ctx) => {
  const key = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(raw)?.[1];
  const bytes = key === undefined ? 0 : Buffer.from(key, 'base64').length;
  if (bytes < 24 || bytes > 64) return refuse(ctx, 'expected whsec_ and the base64 of 24 to 64 random bytes (openssl rand -base64 32)');
  return raw;
});

/** The outbox relay: where events go, how often, and how long they are retried. */
export const outboxVariables = group('The outbox relay', {
  webhookUrl: httpUrl({ name: 'NOTIFY_WEBHOOK_URL', shown: '(none: log)' }).describe('where the relay POSTs events'),
  // Required with a URL outside development (src/core/config.ts).
  webhookSecret: custom({ name: 'NOTIFY_WEBHOOK_SECRET', accepts: '`whsec_` + base64 of 24 to 64 bytes', schema: notifySecret }).describe(
    'signs every delivery as Standard Webhooks says (`webhook-id`, `webhook-timestamp`, `webhook-signature`), so a receiver can tell ' +
      "a forged event from this server's ([the outbox](#signed-deliveries)); required with `NOTIFY_WEBHOOK_URL` outside development",
  ),
  webhookPreviousSecret: custom({
    name: 'NOTIFY_WEBHOOK_SECRET_PREVIOUS',
    accepts: '`whsec_` + base64 of 24 to 64 bytes',
    schema: notifySecret,
  }).describe(
    'during a rotation, the secret being replaced: every delivery carries a signature by each, so receivers with either accept it',
  ),
  webhookTimeoutMs: wholeNumber({ name: 'NOTIFY_WEBHOOK_TIMEOUT_MS', default: 5_000, min: 100, max: 120_000 }).describe(
    "one delivery's time limit",
  ),
  batchSize: wholeNumber({ name: 'OUTBOX_BATCH_SIZE', default: 100, min: 1, max: 10_000 }).describe('events claimed per pass'),
  pollIntervalMs: wholeNumber({ name: 'OUTBOX_POLL_INTERVAL_MS', default: 500, min: 10, max: 600_000 }).describe(
    'pause between passes when idle',
  ),
  leaseMs: wholeNumber({ name: 'OUTBOX_LEASE_MS', default: 30_000, min: 100, max: 3_600_000 }).describe(
    'how long a claim holds its events before another relay may take them',
  ),
  retryForMs: duration({ name: 'OUTBOX_RETRY_FOR', default: 72 * 3_600_000, min: 1_000, max: 30 * 86_400_000 }).describe(
    'how long an event is retried, from when it was written (or given back by `npm run outbox:requeue`), before it is marked dead',
  ),
  maxAttempts: wholeNumber({ name: 'OUTBOX_MAX_ATTEMPTS', min: 1, max: 1_000_000 }).describe(
    'when set, an event is also marked dead after this many deliveries',
  ),
  retryBaseDelayMs: wholeNumber({ name: 'OUTBOX_RETRY_BASE_MS', default: 1_000, min: 1, max: 3_600_000 }).describe(
    'the smallest full-jitter backoff between attempts, doubled on each attempt up to `OUTBOX_RETRY_MAX_MS`',
  ),
  retryMaxDelayMs: wholeNumber({ name: 'OUTBOX_RETRY_MAX_MS', default: 300_000, min: 'OUTBOX_RETRY_BASE_MS', max: 86_400_000 }).describe(
    'the largest backoff; after the receiver recovers, the first delivery succeeds within it (at once when new events arrive) ' +
      'and each delivery then brings a waiting retry forward ([the outbox](#the-outbox-through-a-long-outage))',
  ),
});
