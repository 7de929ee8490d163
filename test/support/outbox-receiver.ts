import { Webhook } from 'standardwebhooks';

/** An event as this server's outbox relay posts it. */
export interface OutboxDelivery {
  id: string;
  tenantId: string;
  topic: string;
  payload: unknown;
  createdAt: string;
}

/**
 * A receiver of the outbox's deliveries, as docs/operations.md shows one: the event, once its
 * Standard Webhooks signature verifies on the raw body with the receiver's secret.
 */
export function verifiedEvent(secret: string, rawBody: string, headers: Record<string, string>): OutboxDelivery {
  // Throws on a missing, wrong or stale (over 5 minutes) signature: answer 400 and do nothing.
  return new Webhook(secret).verify(rawBody, headers) as OutboxDelivery;
}
