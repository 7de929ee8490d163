import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/core/config.js';
import { outboxSink, relayDeps } from '../src/entry/worker/index.js';
import { relayOnce } from '../src/features/outbox/relay.js';
import { createTenant, createTestBackend, type TestBackend } from './support/harness.js';
import { verifiedEvent } from './support/outbox-receiver.js';
import { listenOnLoopback, type LoopbackServer } from './support/ports.js';

// Every outbox delivery is signed as the Standard Webhooks specification says, with
// NOTIFY_WEBHOOK_SECRET (and NOTIFY_WEBHOOK_SECRET_PREVIOUS during a rotation): a receiver
// verifies it with the `standardwebhooks` package, as docs/operations.md shows, and tells a forged
// event from this server's. Outside development a relay with a URL and no secret does not start.

const TENANT = 'signed-outbox';
const OLD = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const NEW = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;

interface Delivery {
  body: string;
  headers: Record<string, string>;
}

describe('signed outbox deliveries', () => {
  let backend: TestBackend;
  let receiver: LoopbackServer;
  const deliveries: Delivery[] = [];

  beforeAll(async () => {
    receiver = await listenOnLoopback(
      createServer((req, res) => {
        let body = '';
        req.on('data', (chunk) => (body += chunk));
        req.on('end', () => {
          deliveries.push({ body, headers: req.headers as Record<string, string> });
          res.writeHead(204).end();
        });
      }),
    );
    backend = await createTestBackend();
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await receiver.close();
  });

  /** One event delivered by a relay configured with `secrets`; what the receiver got. */
  async function deliverOne(env: Record<string, string>): Promise<Delivery> {
    await backend.sql.query(
      "insert into outbox_events (tenant_id, topic, payload) values ($1, 'order.paid', jsonb_build_object('orderId', gen_random_uuid()))",
      [TENANT],
    );
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: backend.databaseUrl,
      NOTIFY_WEBHOOK_URL: `${receiver.origin}/hook`,
      ...env,
    });
    const services = { ...backend.services, config };
    const before = deliveries.length;
    while ((await relayOnce(relayDeps(services, outboxSink(services)))).claimed > 0);
    expect(deliveries.length).toBeGreaterThan(before);
    return deliveries.at(-1)!;
  }

  it('signs each delivery: webhook-id is the event, and a receiver with the secret verifies it with standardwebhooks', async () => {
    const delivery = await deliverOne({ NOTIFY_WEBHOOK_SECRET: NEW });
    const verified = verifiedEvent(NEW, delivery.body, delivery.headers);
    expect(verified).toMatchObject({ id: delivery.headers['webhook-id'], topic: 'order.paid' });
    expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    // A forged body, another secret, or no signature at all: refused.
    expect(() => new Webhook(NEW).verify(delivery.body.replace('order.paid', 'order.refunded'), delivery.headers)).toThrow();
    expect(() => new Webhook(OLD).verify(delivery.body, delivery.headers)).toThrow();
    const { 'webhook-signature': _dropped, ...unsigned } = delivery.headers;
    expect(() => new Webhook(NEW).verify(delivery.body, unsigned)).toThrow();
  });

  it('during a rotation each delivery carries a signature by each secret: receivers with the old or the new one verify it', async () => {
    const delivery = await deliverOne({ NOTIFY_WEBHOOK_SECRET: NEW, NOTIFY_WEBHOOK_SECRET_PREVIOUS: OLD });
    expect(delivery.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(verifiedEvent(OLD, delivery.body, delivery.headers)).toMatchObject({ topic: 'order.paid' });
    expect(verifiedEvent(NEW, delivery.body, delivery.headers)).toMatchObject({ topic: 'order.paid' });
  });

  it('outside development, a relay with NOTIFY_WEBHOOK_URL and no secret refuses to start', () => {
    const production = {
      NODE_ENV: 'production',
      DATABASE_URL: backend.databaseUrl,
      ACTION_SECRET: 'a-secret-of-sixteen-chars',
      NOTIFY_WEBHOOK_URL: `${receiver.origin}/hook`,
    };
    expect(() => loadConfig(production, { servesHttp: false })).toThrow(ConfigError);
    expect(() => loadConfig(production, { servesHttp: false })).toThrow(/NOTIFY_WEBHOOK_SECRET/);
    expect(loadConfig({ ...production, NOTIFY_WEBHOOK_SECRET: NEW }, { servesHttp: false }).outbox.webhookSecret).toBe(NEW);
  });
});
