import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument, ConfirmCheckoutDocument, RefundOrderDocument } from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
import { killBeforeRecord, postGraphQL, startCheckoutServer, webhookTarget, withRestarted } from './support/checkout-kill-steps.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';
import { waitFor } from './support/wait.js';

// The refund and 3-D Secure steps, each killed in a real server process (SIGKILL) after Stripe
// answered and before the answer was recorded: refundOrder's refund, a refund event's list of
// refunds, the reconciler's sweep over the account's refunds, confirmCheckout's look-up, and the
// cancel of an authentication given up. A server process started afresh then finishes the step (a
// client's resend with its key, Stripe's resend of the event, its reconciler), and every refund
// Stripe made is recorded once, every 3-D Secure order settled once (test/support/checkout-run.ts
// counts both against the stub's ledger). Slow: each case starts two server processes.

const SECRET = 'whsec_test_kill_steps_0123456789abcdef';
const WORKERS = { RUN_WORKERS: 'true', PAYMENTS_RECONCILE_INTERVAL_MS: '50', STRIPE_WEBHOOK_SECRET: SECRET };

describe('refunds and 3-D Secure when the server process is killed between asking Stripe and recording its answer', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: SECRET }) });
    stub.webhooks.mode = 'held';
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  /** A tenant with one member's order, checked out in the test's own backend with a coupon of 500 yen. */
  const orderOf = async (tenantId: string, paymentMethod: string) => {
    await createTenant(backend, tenantId, 1_000_000);
    const [coupon] = await issueCoupons(backend, tenantId, 'kill', 500, ['buyer']);
    const input = { amountYen: 2_000, couponId: coupon!, paymentMethod };
    return (await gqlOk(fetch, CheckoutDocument, { input }, asUser(tenantId, 'buyer'))).checkout.order!;
  };
  const orderRow = async (orderId: string) =>
    (await backend.sql.query('select status, refunded_yen from orders where id = $1', [orderId])).rows[0] as {
      status: string;
      refunded_yen: number;
    };
  const violations = async (tenantId: string) => checkoutViolations(await readCheckoutTables(backend.sql, tenantId), stub, tenantId, true);
  /** The test backend's reconciler, with everything due: nothing is left for it once the restarted process finished the step. */
  const reconcileAll = async () => {
    await backend.sql.query("update payment_intents set next_attempt_at = now() where status = 'pending'");
    await backend.sql.query("update refunds set next_attempt_at = now() where status = 'pending'");
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    return backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  };
  const refundsAt = (orderId: string) => stub.refunds.filter((refund) => refund.orderId === orderId).length;

  it.for(['resend', 'reconciler'] as const)(
    'refundOrder killed after Stripe refunded: the %s records the refund once, REFUNDED, the coupon given back',
    async (finisher) => {
      const tenantId = `kill-refund-${finisher}`;
      const order = await orderOf(tenantId, 'pm_card_visa');
      const headers = { ...asTenantAdmin(tenantId), 'idempotency-key': `${tenantId}-refund` };
      const refund = (server: Parameters<typeof postGraphQL>[0]) =>
        postGraphQL(server, RefundOrderDocument, { input: { orderId: order.id } }, headers);
      const server = await startCheckoutServer(backend, stub);
      await killBeforeRecord(backend, stub, server, { kind: 'refund', tenantId, orderId: order.id, start: () => refund(server) });
      expect({ order: await orderRow(order.id), refunds: refundsAt(order.id) }).toEqual({
        order: { status: 'PAID', refunded_yen: 0 },
        refunds: 1,
      });
      if (finisher === 'resend') {
        const resent = await withRestarted(backend, stub, {}, refund);
        expect(resent?.data?.['refundOrder']).toMatchObject({ order: { id: order.id, status: 'REFUNDED', refundedYen: 1_500 } });
      } else {
        await backend.sql.query("update refunds set next_attempt_at = now() where order_id = $1 and status = 'pending'", [order.id]);
        await withRestarted(backend, stub, WORKERS, () =>
          waitFor(async () => ((await orderRow(order.id)).status === 'REFUNDED' ? true : undefined), 'the refund recorded'),
        );
      }
      await reconcileAll();
      expect({ order: await orderRow(order.id), refunds: refundsAt(order.id), violations: await violations(tenantId) }).toEqual({
        order: { status: 'REFUNDED', refunded_yen: 1_500 },
        refunds: 1,
        violations: [],
      });
    },
  );

  it("a refund event's handler killed after Stripe listed the refunds: Stripe's resend of the event, and the other event, record it once", async () => {
    const tenantId = 'kill-refund-event';
    const order = await orderOf(tenantId, 'pm_card_visa');
    stub.refundInDashboard(stub.intentOf(order.id)!.id, 400);
    const events = stub.webhooks.events.filter((event) => event.intentId === stub.intentOf(order.id)!.id);
    const deliver = (type: string) => {
      const event = events.find((candidate) => candidate.type === type)!;
      return stub.webhooks.send(event.payload, stub.webhooks.sign(event.payload));
    };
    const server = await startCheckoutServer(backend, stub, { STRIPE_WEBHOOK_SECRET: SECRET });
    stub.webhooks.sendTo(webhookTarget(server), SECRET);
    await killBeforeRecord(backend, stub, server, {
      kind: 'list-refunds',
      tenantId,
      orderId: order.id,
      start: () => deliver('charge.refunded'),
    });
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 0 });
    // Stripe sends the event again later: by then the dead delivery's claim on it has lapsed.
    await backend.sql.query("update provider_events set claimed_at = now() - interval '1 hour' where handled_at is null");
    const statuses = await withRestarted(backend, stub, { STRIPE_WEBHOOK_SECRET: SECRET }, async (restarted) => {
      stub.webhooks.sendTo(webhookTarget(restarted), SECRET);
      const resent = (await deliver('charge.refunded')).status;
      const afterResend = await orderRow(order.id);
      return { resent, afterResend, other: (await deliver('refund.created')).status };
    });
    stub.webhooks.sendTo(fetch, SECRET);
    expect(statuses).toEqual({ resent: 200, afterResend: { status: 'PAID', refunded_yen: 400 }, other: 200 });
    await reconcileAll();
    expect({ order: await orderRow(order.id), violations: await violations(tenantId) }).toEqual({
      order: { status: 'PAID', refunded_yen: 400 },
      violations: [],
    });
  });

  it("the reconciler killed in its sweep after Stripe listed the account's refunds: a restarted reconciler records each once", async () => {
    const tenantId = 'kill-refund-sweep';
    const order = await orderOf(tenantId, 'pm_card_visa');
    const intentId = stub.intentOf(order.id)!.id;
    stub.refundInDashboard(intentId, 300);
    stub.refundInDashboard(intentId, 1_200);
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    const server = await startCheckoutServer(backend, stub, WORKERS);
    await killBeforeRecord(backend, stub, server, { kind: 'account-refunds', tenantId, orderId: order.id, start: async () => null });
    expect(await orderRow(order.id)).toEqual({ status: 'PAID', refunded_yen: 0 });
    // The dead sweep had claimed its turn: the next is due PAYMENTS_RECONCILE_AFTER_MS later.
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    await withRestarted(backend, stub, WORKERS, () =>
      waitFor(async () => ((await orderRow(order.id)).status === 'REFUNDED' ? true : undefined), 'the refunds recorded'),
    );
    await reconcileAll();
    expect({ order: await orderRow(order.id), violations: await violations(tenantId) }).toEqual({
      order: { status: 'REFUNDED', refunded_yen: 1_500 },
      violations: [],
    });
  });

  it('confirmCheckout killed after Stripe said the authentication succeeded: its resend with the key settles PAID once; the late event changes nothing', async () => {
    const tenantId = 'kill-confirm';
    const order = await orderOf(tenantId, 'pm_card_threeDSecure2Required');
    expect(order.status).toBe('PENDING_PAYMENT');
    stub.authenticate(stub.intentOf(order.id)!.id, 'succeed');
    const headers = { ...asUser(tenantId, 'buyer'), 'idempotency-key': `${tenantId}-confirm` };
    const confirm = (server: Parameters<typeof postGraphQL>[0]) =>
      postGraphQL(server, ConfirmCheckoutDocument, { input: { orderId: order.id } }, headers);
    const server = await startCheckoutServer(backend, stub);
    await killBeforeRecord(backend, stub, server, { kind: 'lookup', tenantId, orderId: order.id, start: () => confirm(server) });
    expect((await orderRow(order.id)).status).toBe('PENDING_PAYMENT');
    const resent = await withRestarted(backend, stub, { STRIPE_WEBHOOK_SECRET: SECRET }, async (restarted) => {
      const answer = await confirm(restarted);
      stub.webhooks.sendTo(webhookTarget(restarted), SECRET);
      const succeeded = stub.webhooks.events.find(
        (event) => event.intentId === stub.intentOf(order.id)!.id && event.type === 'payment_intent.succeeded',
      )!;
      await stub.webhooks.send(succeeded.payload, stub.webhooks.sign(succeeded.payload));
      return answer;
    });
    stub.webhooks.sendTo(fetch, SECRET);
    expect(resent?.data?.['confirmCheckout']).toMatchObject({ status: 'PAID', order: { id: order.id, status: 'PAID' } });
    await reconcileAll();
    expect({ order: await orderRow(order.id), violations: await violations(tenantId) }).toEqual({
      order: { status: 'PAID', refunded_yen: 0 },
      violations: [],
    });
  });

  it.for([
    ['abandoned', 'CANCELED'],
    ['finished in the last second', 'PAID'],
  ] as const)(
    'the reconciler killed after Stripe answered the cancel of an authentication given up (%s): a restarted reconciler settles it %s, once',
    async ([customer, settled]) => {
      const tenantId = `kill-give-up-${settled.toLowerCase()}`;
      const order = await orderOf(tenantId, 'pm_card_threeDSecure2Required');
      if (settled === 'PAID') stub.authenticate(stub.intentOf(order.id)!.id, 'succeed');
      // As if PAYMENTS_ACTION_TIMEOUT_MS had passed since the order asked for authentication.
      const expire = () =>
        backend.sql.query(
          "update payment_intents set action_since = now() - interval '1 day', next_attempt_at = now() where order_id = $1",
          [order.id],
        );
      await expire();
      const server = await startCheckoutServer(backend, stub, WORKERS);
      await killBeforeRecord(backend, stub, server, { kind: 'cancel', tenantId, orderId: order.id, start: async () => null });
      expect({ customer, status: (await orderRow(order.id)).status }).toEqual({ customer, status: 'PENDING_PAYMENT' });
      await expire();
      await withRestarted(backend, stub, WORKERS, () =>
        waitFor(async () => ((await orderRow(order.id)).status === settled ? true : undefined), `the order ${settled}`),
      );
      await reconcileAll();
      expect({ order: await orderRow(order.id), violations: await violations(tenantId) }).toEqual({
        order: { status: settled, refunded_yen: 0 },
        violations: [],
      });
    },
  );
});
