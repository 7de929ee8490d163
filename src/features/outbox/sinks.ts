import { Webhook } from 'standardwebhooks';
import { traceparentOf } from '../../core/tracing.js';
import type { Logger } from '../../core/logger.js';

export interface OutboxEvent {
  tenantId: string;
  id: string;
  topic: string;
  payload: unknown;
  attempts: number;
  createdAt: Date;
  /** The trace of the request that wrote it, which its delivery continues. */
  traceparent: string | null;
}

/** Where events go. A sink throws to say "not delivered"; the relay then retries later. */
export interface OutboxSink {
  name: string;
  deliver(event: OutboxEvent): Promise<void>;
}

/**
 * An outbox sink that writes each event to the log: the development default.
 *
 * @example await logSink(log).deliver(event)
 */
export function logSink(log: Logger): OutboxSink {
  return {
    name: 'log',
    async deliver(event) {
      log.info({ eventId: event.id, topic: event.topic, tenantId: event.tenantId }, 'outbox event delivered');
    },
  };
}

/**
 * The Standard Webhooks headers of one delivery: `webhook-id` (the event's id, the same on every
 * retry), `webhook-timestamp` (seconds, now) and `webhook-signature`, one `v1,<base64 HMAC-SHA256>`
 * of `id.timestamp.body` per secret, space-separated: during a rotation a receiver holding either
 * the new or the old secret verifies it.
 *
 * @example const headers = signatureHeaders(signers, event.id, body)
 */
function signatureHeaders(signers: Webhook[], id: string, body: string, now = new Date()): Record<string, string> {
  if (signers.length === 0) return {};
  const timestamp = new Date(Math.floor(now.getTime() / 1000) * 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp.getTime() / 1000),
    'webhook-signature': signers.map((signer) => signer.sign(id, timestamp, body)).join(' '),
  };
}

/**
 * POSTs the event as JSON, signed as Standard Webhooks says with each of `secrets` (NOTIFY_WEBHOOK_SECRET,
 * and NOTIFY_WEBHOOK_SECRET_PREVIOUS during a rotation; none in development without one), so that a
 * receiver can tell a forged event from this server's. The event id is also the Idempotency-Key, so a
 * receiver can drop the repeats that at-least-once delivery produces (a relay that dies after sending,
 * before marking).
 *
 * @example await webhookSink('https://hooks.example/outbox', 5000, [secret]).deliver(event)
 */
export function webhookSink(url: string, timeoutMs: number, secrets: string[] = []): OutboxSink {
  const signers = secrets.map((secret) => new Webhook(secret));
  return {
    name: signers.length > 0 ? 'webhook (signed)' : 'webhook',
    async deliver(event) {
      // The delivery's trace context goes along, so the receiver's work joins the same trace.
      const traceparent = traceparentOf();
      const body = JSON.stringify({
        id: event.id,
        tenantId: event.tenantId,
        topic: event.topic,
        payload: event.payload,
        createdAt: event.createdAt,
      });
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': event.id,
          ...signatureHeaders(signers, event.id, body),
          ...(traceparent ? { traceparent } : {}),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`webhook answered ${response.status}`);
    },
  };
}
