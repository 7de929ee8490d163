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

export function logSink(log: Logger): OutboxSink {
  return {
    name: 'log',
    async deliver(event) {
      log.info({ eventId: event.id, topic: event.topic, tenantId: event.tenantId }, 'outbox event delivered');
    },
  };
}

/**
 * POSTs the event as JSON. The event id is the Idempotency-Key, so a receiver can drop the
 * repeats that at-least-once delivery produces (a relay that dies after sending, before marking).
 */
export function webhookSink(url: string, timeoutMs: number): OutboxSink {
  return {
    name: 'webhook',
    async deliver(event) {
      // The delivery's trace context goes along, so the receiver's work joins the same trace.
      const traceparent = traceparentOf();
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': event.id, ...(traceparent ? { traceparent } : {}) },
        body: JSON.stringify({
          id: event.id,
          tenantId: event.tenantId,
          topic: event.topic,
          payload: event.payload,
          createdAt: event.createdAt,
        }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`webhook answered ${response.status}`);
    },
  };
}
