import type { AppServices } from '../../services/services.js';
import { webhookDeps } from '../../features/checkout/webhook.js';
import { BodyTooLargeError, readLimitedBody } from '../body.js';
import { refusal } from '../refusals.js';
import type { Route } from './route.js';

const STRIPE_WEBHOOK_PATH = '/webhooks/stripe';

/**
 * POST /webhooks/stripe: Stripe's events, read as raw bytes (the signature is over them, not over
 * a parsed and re-serialized body) up to MAX_BODY_BYTES, then judged and acted on by the checkout
 * algorithm in use (src/features/checkout/webhook.ts). It takes no admission turn: Stripe is one
 * caller, and a delivery holds a pool connection only for its short transactions.
 */
export function stripeWebhookRoute(services: AppServices): Route {
  const { config } = services;
  const deps = webhookDeps({
    db: services.pool,
    transactions: services.transactions,
    provider: services.payments,
    secret: config.payments.webhookSecret,
    options: config.payments,
    log: services.log,
    clock: services.clock,
    refused: (source) => services.metrics.paymentAnswersRefused.inc({ source }),
    counted: (result) => services.metrics.stripeWebhookEvents.inc({ result }),
  });
  return {
    matches: (_method, pathname) => pathname === STRIPE_WEBHOOK_PATH,
    async serve(request) {
      if (request.method !== 'POST')
        return Response.json({ message: `${STRIPE_WEBHOOK_PATH} takes POST` }, { status: 405, headers: { allow: 'POST' } });
      let raw: Buffer;
      try {
        raw = Buffer.from(await (await readLimitedBody(request, config.server.maxBodyBytes)).arrayBuffer());
      } catch (error) {
        if (!(error instanceof BodyTooLargeError)) throw error;
        return refusal(STRIPE_WEBHOOK_PATH, error.message, 413, { connection: 'close' }, 'MAX_BODY_BYTES');
      }
      const result = await services.checkout.webhook(deps, raw, request.headers.get('stripe-signature'));
      return Response.json(result.body, { status: result.status });
    },
  };
}
