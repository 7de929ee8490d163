import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import type pg from 'pg';
import { CheckoutDocument, ConfirmCheckoutDocument } from '../generated/graphql.js';
import { TEST_STRIPE_KEY } from '../support/checkout-run.js';
import { startStripeStub } from '../support/stripe-stub.js';
import { LoadClient, runLanes } from './client.js';
import { countBy, summarize } from './stats.js';
import { BENCH_ACTION_SECRET, startServerProcess } from './target.js';

/**
 * The 3-D Secure row of `npm run bench:checkout`: every purchase asks for authentication, which the
 * stub finishes `authenticateMs` later as a customer would, and Stripe's webhook (signed, sent to the
 * server) or the customer's confirmCheckout, whichever comes first, settles it. While customers
 * authenticate, their checkouts wait with nothing held: the row samples /metrics for how many wait
 * on customers at once, and how many pool connections and admission turns are in use meanwhile.
 */

const WEBHOOK_SECRET = 'whsec_bench_0123456789abcdefghijkl';
const SAMPLE_EVERY_MS = 100;

export interface ThreeDSecureRow {
  label: string;
  purchasesPerSecond: number;
  p50: number;
  p99: number;
  answers: Record<string, number>;
  /** The most payments waiting on their customer at once (payments_awaiting_customer). */
  awaitingMax: number;
  /** The most pool connections in use, and admission turns held, at any sample; and their means over the samples. */
  poolInUseMax: number;
  inFlightMax: number;
  poolInUseMean: number;
  inFlightMean: number;
  samples: number;
}

/** One Prometheus sample's value (the first line of `name` whose labels contain `labels`). */
function sampleOf(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(name) && candidate.includes(labels));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

export interface ThreeDSecureArgs {
  seconds: number;
  clients: number;
  pool: number;
  latencyMs: number;
  authenticateMs: number;
}

export async function measureThreeDSecure(databaseUrl: string, sql: pg.Pool, args: ThreeDSecureArgs): Promise<ThreeDSecureRow> {
  const stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY, latencyMs: args.latencyMs, authenticateAfterMs: args.authenticateMs });
  const server = await startServerProcess('test/support/checkout-server.ts', {
    DATABASE_URL: databaseUrl,
    NODE_ENV: 'production',
    ACTION_SECRET: BENCH_ACTION_SECRET,
    RUN_WORKERS: 'false',
    DB_POOL_MAX: String(args.pool),
    STRIPE_SECRET_KEY: TEST_STRIPE_KEY,
    STRIPE_API_URL: stub.url,
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  });
  const base = server.url.replace(/\/graphql$/, '');
  stub.webhooks.sendTo((request) => fetch(new Request(`${base}/webhooks/stripe`, request)), WEBHOOK_SECRET);
  const tenantId = `bench-3ds-${args.authenticateMs}`;
  await sql.query('insert into tenants (id, name, monthly_cap_yen) values ($1, $1, 1000000) on conflict do nothing', [tenantId]);
  const client = new LoadClient(server.url, args.clients);
  const headers = (index: number) => ({
    'x-action-secret': BENCH_ACTION_SECRET,
    'x-hasura-role': 'user',
    'x-hasura-tenant-id': tenantId,
    'x-hasura-user-id': `client-${index % args.clients}`,
  });
  const peaks = { awaitingMax: 0, poolInUseMax: 0, inFlightMax: 0, poolInUseMean: 0, inFlightMean: 0, samples: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const text = await (await fetch(server.metricsUrl)).text();
      peaks.awaitingMax = Math.max(peaks.awaitingMax, sampleOf(text, 'payments_awaiting_customer'));
      const inUse = sampleOf(text, 'db_pool_connections', 'state="in_use"');
      const inFlight = sampleOf(text, 'graphql_operations', 'state="in_flight"');
      peaks.poolInUseMax = Math.max(peaks.poolInUseMax, inUse);
      peaks.inFlightMax = Math.max(peaks.inFlightMax, inFlight);
      peaks.poolInUseMean = (peaks.poolInUseMean * peaks.samples + inUse) / (peaks.samples + 1);
      peaks.inFlightMean = (peaks.inFlightMean * peaks.samples + inFlight) / (peaks.samples + 1);
      peaks.samples++;
      await sleep(SAMPLE_EVERY_MS);
    }
  })();
  try {
    await client.open();
    const until = performance.now() + args.seconds * 1_000;
    const started = performance.now();
    // A purchase: checkout, the customer authenticating in the browser, then confirmCheckout.
    const purchases = await runLanes(
      (index) =>
        performance.now() >= until
          ? null
          : async () => {
              const begun = performance.now();
              const input = { amountYen: 1_000, paymentMethod: 'pm_card_threeDSecure2Required' };
              const asked = await client.graphql(print(CheckoutDocument), { input }, headers(index));
              const order = (asked.body.data?.['checkout'] as { order?: { id: string } } | undefined)?.order;
              if (!order) return { status: String(asked.body.errors?.[0]?.extensions?.['code'] ?? `HTTP ${asked.status}`), ms: 0 };
              await sleep(args.authenticateMs);
              const confirmed = await client.graphql(print(ConfirmCheckoutDocument), { input: { orderId: order.id } }, headers(index));
              const status = (confirmed.body.data?.['confirmCheckout'] as { status: string } | undefined)?.status;
              return {
                status: status ?? String(confirmed.body.errors?.[0]?.extensions?.['code'] ?? `HTTP ${confirmed.status}`),
                ms: performance.now() - begun,
              };
            },
      args.clients,
    );
    const elapsedS = (performance.now() - started) / 1_000;
    const paid = purchases.filter((purchase) => purchase.status === 'PAID');
    const latency = summarize(paid.map((purchase) => purchase.ms));
    return {
      label: `checkout with 3-D Secure, finished ${args.authenticateMs} ms later, provider ${args.latencyMs} ms, split (ours)`,
      purchasesPerSecond: paid.length / elapsedS,
      p50: latency.p50,
      p99: latency.p99,
      answers: countBy(purchases, (purchase) => purchase.status),
      ...peaks,
    };
  } finally {
    sampling = false;
    await sampler.catch(() => undefined);
    client.close();
    await server.stop();
    await stub.close();
  }
}
