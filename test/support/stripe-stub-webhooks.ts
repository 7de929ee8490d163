import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';

/**
 * The Stripe stub's webhook deliveries (stripe-stub.ts): every change of a PaymentIntent, and every
 * refund, becomes an event (a refund two: charge.refunded and refund.created), signed as Stripe signs it (the real SDK's `webhooks.generateTestHeaderString`) and POSTed
 * to the endpoint the test names. `immediate` delivers each as it happens (after `delayMs`);
 * `held` keeps them until the test delivers them: late, twice, in reverse or not at all.
 */

export interface StubEvent {
  id: string;
  type: string;
  /** The JSON body as sent. */
  payload: string;
  intentId: string;
}

/** Where deliveries go: the app in process (`backend.app.fetch`) or a server over HTTP. */
export type WebhookTarget = (request: Request) => Promise<Response>;

export interface DeliveryOptions {
  /** Each event delivered this many times (Stripe's at-least-once). */
  times?: number;
  reversed?: boolean;
  /** Lost on the way: never delivered. */
  lose?: (event: StubEvent) => boolean;
}

export class StubWebhooks {
  readonly events: StubEvent[] = [];
  /** Events made while `held`, not yet delivered. */
  private queue: StubEvent[] = [];
  private target: WebhookTarget | null = null;
  private secret = '';
  mode: 'immediate' | 'held' = 'immediate';
  delayMs = 0;
  /** Every delivery's answer: the event's id and the status. */
  readonly answers: { eventId: string; status: number }[] = [];
  private inFlight = new Set<Promise<unknown>>();

  /** Sends the events to `target`, signed with `secret` (the server's STRIPE_WEBHOOK_SECRET). */
  sendTo(target: WebhookTarget, secret: string): void {
    this.target = target;
    this.secret = secret;
  }

  /** Called on every change of a PaymentIntent, and on every refund (charge.refunded, refund.created): the event of `object`. */
  record(type: string, object: unknown, intentId: string): void {
    const id = `evt_${randomBytes(12).toString('hex')}`;
    const payload = JSON.stringify({
      id,
      object: 'event',
      api_version: '2025-03-31.basil',
      created: Math.floor(Date.now() / 1000),
      type,
      livemode: false,
      pending_webhooks: 1,
      data: { object },
    });
    const event = { id, type, payload, intentId };
    this.events.push(event);
    if (this.target === null) return;
    if (this.mode === 'held') return void this.queue.push(event);
    this.track(new Promise((resolve) => setTimeout(resolve, this.delayMs)).then(() => this.post(event)));
  }

  /** The signature header Stripe would send for `payload` (a test's own secret or time for a forged or stale one). */
  sign(payload: string, options: { secret?: string; timestamp?: number } = {}): string {
    return Stripe.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? this.secret, timestamp: options.timestamp });
  }

  /** POSTs a body with a signature header of the test's choosing (null: none). */
  async send(payload: string, signature: string | null): Promise<Response> {
    if (this.target === null) throw new Error('no webhook target: call sendTo first');
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    if (signature !== null) headers['stripe-signature'] = signature;
    return this.target(new Request('http://stripe.test/webhooks/stripe', { method: 'POST', headers, body: payload }));
  }

  private async post(event: StubEvent): Promise<number> {
    const response = await this.send(event.payload, this.sign(event.payload));
    await response.body?.cancel();
    this.answers.push({ eventId: event.id, status: response.status });
    return response.status;
  }

  private track(delivery: Promise<unknown>) {
    this.inFlight.add(delivery);
    void delivery.catch(() => undefined).finally(() => this.inFlight.delete(delivery));
  }

  /** Delivers what was held, as told, and what their deliveries made meanwhile (a cancel's event); the statuses in the order sent. */
  async deliver(options: DeliveryOptions = {}): Promise<number[]> {
    const statuses: number[] = [];
    while (this.queue.length > 0) {
      const held = this.queue;
      this.queue = [];
      for (const event of options.reversed ? [...held].reverse() : held) {
        if (options.lose?.(event)) continue;
        for (let i = 0; i < (options.times ?? 1); i++) statuses.push(await this.post(event));
      }
    }
    return statuses;
  }

  /** Waits for the immediate deliveries under way. */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}
