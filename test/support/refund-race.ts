import { reconcileDeps } from '../../src/entry/worker/index.js';
import { CheckoutDocument, RefundOrderDocument } from '../generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables } from './checkout-run.js';
import { asTenantAdmin, asUser, createTenant, gql, gqlOk, type TestBackend } from './harness.js';
import type { StripeStub } from './stripe-stub.js';

export interface RefundRaceResult {
  /** What checkoutViolations found once everything was delivered and the reconciler had run. */
  violations: string[];
  /** Orders by status at the end (every one is wholly refunded at Stripe by then). */
  statuses: Record<string, number>;
  refundsAtProvider: number;
  refundsRecorded: number;
  /** Coupons still redeemed at the end (a wholly refunded order gives its coupon back). */
  couponsRedeemed: number;
  /** Webhook deliveries and their answers' statuses. */
  deliveries: Record<string, number>;
}

const count = (values: (string | number)[]) =>
  values.reduce<Record<string, number>>((counts, value) => ({ ...counts, [value]: (counts[value] ?? 0) + 1 }), {});

/**
 * Every way this server learns of a refund, at once. Each of `orders` paid orders (1,300 yen less a
 * 300-yen coupon) has a refund of this server's whose answer was lost (Stripe made it) and one made
 * in Stripe's dashboard, their events held. Then, released together: every event delivered three
 * times in reverse, refundOrder's resend with the lost refund's key twice per order, a new refund of
 * the rest per order, and two reconciler passes with everything due (the sweep included). Then what
 * is left is delivered and the reconciler runs again, and the tables are counted against the stub:
 * every Stripe refund recorded once, refundedYen Stripe's, one order.refunded each, every order
 * REFUNDED and its coupon given back.
 */
export async function runRefundRace(backend: TestBackend, stub: StripeStub, tenantId: string, orders: number): Promise<RefundRaceResult> {
  const fetch = (request: Request) => backend.app.fetch(request);
  await createTenant(backend, tenantId, 1_000_000);
  const members = Array.from({ length: orders }, (_, i) => `refunder-${i}`);
  const coupons = await issueCoupons(backend, tenantId, 'refund-race', 300, members);
  const orderIds: string[] = [];
  for (const [i, member] of members.entries()) {
    const input = { amountYen: 1_300, couponId: coupons[i]!, paymentMethod: 'pm_card_visa' };
    orderIds.push((await gqlOk(fetch, CheckoutDocument, { input }, asUser(tenantId, member))).checkout.order!.id);
  }
  stub.webhooks.mode = 'held';
  const refund = (orderId: string, amountYen: number, key: string) =>
    gql(fetch, RefundOrderDocument, { input: { orderId, amountYen } }, { ...asTenantAdmin(tenantId), 'idempotency-key': key });
  for (const orderId of orderIds) {
    stub.failNext('refund', 'lost502');
    await refund(orderId, 300, `${orderId}-lost`);
    stub.refundInDashboard(stub.intentOf(orderId)!.id, 400);
  }
  const reconcile = async () => {
    await backend.sql.query("update refunds set next_attempt_at = now() where tenant_id = $1 and status = 'pending'", [tenantId]);
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    return backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  };
  const delivered = stub.webhooks.answers.length;
  const released = await Promise.allSettled([
    stub.webhooks.deliver({ times: 3, reversed: true }),
    ...orderIds.flatMap((orderId) => [refund(orderId, 300, `${orderId}-lost`), refund(orderId, 300, `${orderId}-lost`)]),
    ...orderIds.map((orderId) => refund(orderId, 300, `${orderId}-rest`)),
    reconcile(),
    reconcile(),
  ]);
  const failed = released.filter((result) => result.status === 'rejected');
  if (failed.length > 0) throw new AggregateError(failed.map((result) => (result as PromiseRejectedResult).reason));
  stub.webhooks.mode = 'immediate';
  await stub.webhooks.deliver();
  await reconcile();
  const tables = await readCheckoutTables(backend.sql, tenantId);
  const atProvider = stub.refunds.filter((made) => orderIds.includes(made.orderId));
  return {
    violations: checkoutViolations(tables, stub, tenantId, true),
    statuses: count(tables.orders.map((order) => order.status)),
    refundsAtProvider: atProvider.length,
    refundsRecorded: tables.refunds.length,
    couponsRedeemed: tables.redeemedCoupons.size,
    deliveries: count(stub.webhooks.answers.slice(delivered).map((answer) => answer.status)),
  };
}
