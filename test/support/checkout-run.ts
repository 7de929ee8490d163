import type pg from 'pg';
import { CreateCampaignDocument, IssueCouponDocument } from '../generated/graphql.js';
import { asTenantAdmin, asUser, gqlOk, type TestBackend } from './harness.js';
import type { StripeStub } from './stripe-stub.js';

/** The key tests give the server and its Stripe stub. */
export const TEST_STRIPE_KEY = 'sk_test_checkout_0123456789';

/** The settings of a backend whose payments go to `stub`. */
export const stubPayments = (stub: StripeStub, extra: Record<string, string> = {}): Record<string, string> => ({
  STRIPE_SECRET_KEY: TEST_STRIPE_KEY,
  STRIPE_API_URL: stub.url,
  ...extra,
});

/** A campaign of `discountYen` coupons in the tenant, and one coupon of it for each member; their ids in member order. */
export async function issueCoupons(
  backend: Pick<TestBackend, 'app'>,
  tenantId: string,
  campaignId: string,
  discountYen: number,
  members: string[],
): Promise<string[]> {
  await gqlOk(
    backend.app.fetch,
    CreateCampaignDocument,
    { input: { id: campaignId, name: campaignId, discountYen, budgetYen: discountYen * Math.max(1, members.length) } },
    asTenantAdmin(tenantId),
  );
  const ids: string[] = [];
  for (const member of members) {
    const issued = await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId } }, asUser(tenantId, member));
    ids.push(issued.issueCoupon.coupon!.id);
  }
  return ids;
}

export interface CheckoutTables {
  orders: { id: string; status: string; charged_yen: number; coupon_id: string | null; payment_intent_id: string | null }[];
  /** Events per order id and topic. */
  events: Map<string, Map<string, number>>;
  /** coupon.redeemed events per coupon id. */
  couponRedeemed: Map<string, number>;
  heldCoupons: { id: string; held_by_order_id: string }[];
  redeemedCoupons: Set<string>;
}

/** The tenant's orders, events and coupons as committed, counted with SQL. */
export async function readCheckoutTables(sql: pg.Pool, tenantId: string): Promise<CheckoutTables> {
  const orders = await sql.query<CheckoutTables['orders'][number]>(
    'select id, status, charged_yen, coupon_id, payment_intent_id from orders where tenant_id = $1',
    [tenantId],
  );
  const events = await sql.query<{ order_id: string; topic: string; n: number }>(
    `select payload->>'orderId' as order_id, topic, count(*)::int as n from outbox_events
      where tenant_id = $1 and topic like 'order.%' group by 1, 2`,
    [tenantId],
  );
  const byOrder = new Map<string, Map<string, number>>();
  for (const row of events.rows) {
    const topics = byOrder.get(row.order_id) ?? new Map<string, number>();
    topics.set(row.topic, row.n);
    byOrder.set(row.order_id, topics);
  }
  const redeemedEvents = await sql.query<{ coupon_id: string; n: number }>(
    "select payload->>'couponId' as coupon_id, count(*)::int as n from outbox_events where tenant_id = $1 and topic = 'coupon.redeemed' group by 1",
    [tenantId],
  );
  const coupons = await sql.query<{ id: string; held_by_order_id: string | null; redeemed_at: Date | null }>(
    'select id, held_by_order_id, redeemed_at from coupons where tenant_id = $1',
    [tenantId],
  );
  return {
    orders: orders.rows,
    events: byOrder,
    couponRedeemed: new Map(redeemedEvents.rows.map((row) => [row.coupon_id, row.n])),
    heldCoupons: coupons.rows.filter((c) => c.held_by_order_id !== null) as CheckoutTables['heldCoupons'],
    redeemedCoupons: new Set(coupons.rows.filter((c) => c.redeemed_at !== null).map((c) => c.id)),
  };
}

/**
 * What must hold whatever failed, read from the tables and the stub's ledger: a PAID order has
 * exactly one succeeded charge of its chargedYen (none when it charged 0), a CANCELED order none, no
 * charge exists without its PAID order, a coupon pays at most one order and is redeemed exactly
 * when its order is PAID, one order.paid or order.canceled event per settled order. With
 * `settled`, also that nothing is left PENDING_PAYMENT and no coupon is HELD.
 */
export function checkoutViolations(tables: CheckoutTables, stub: StripeStub, tenantId: string, settled: boolean): string[] {
  const violations: string[] = [];
  const charges = stub.charges.filter((charge) => charge.tenantId === tenantId);
  const chargesOf = new Map<string, number[]>();
  for (const charge of charges) chargesOf.set(charge.orderId, [...(chargesOf.get(charge.orderId) ?? []), charge.amountYen]);
  const orders = new Map(tables.orders.map((order) => [order.id, order]));
  for (const order of tables.orders) {
    const made = chargesOf.get(order.id) ?? [];
    const topics = tables.events.get(order.id) ?? new Map<string, number>();
    if (order.status === 'PAID') {
      const expected = order.charged_yen > 0 ? [order.charged_yen] : [];
      if (JSON.stringify(made) !== JSON.stringify(expected)) violations.push(`PAID order ${order.id} has charges [${made}], not [${expected}]`);
      if (topics.get('order.paid') !== 1 || topics.has('order.canceled'))
        violations.push(`PAID order ${order.id} has events ${JSON.stringify([...topics])}`);
      if (order.coupon_id !== null && (!tables.redeemedCoupons.has(order.coupon_id) || tables.couponRedeemed.get(order.coupon_id) !== 1))
        violations.push(`PAID order ${order.id}: its coupon is not redeemed once`);
    } else if (order.status === 'CANCELED') {
      if (made.length > 0) violations.push(`CANCELED order ${order.id} was charged [${made}]`);
      if (topics.get('order.canceled') !== 1 || topics.has('order.paid'))
        violations.push(`CANCELED order ${order.id} has events ${JSON.stringify([...topics])}`);
    } else {
      if (settled) violations.push(`order ${order.id} is still PENDING_PAYMENT`);
      if (made.length > 1) violations.push(`pending order ${order.id} was charged ${made.length} times`);
    }
  }
  for (const charge of charges) {
    if (orders.get(charge.orderId)?.status !== 'PAID' && settled) violations.push(`charge ${charge.intentId} has no PAID order (${charge.orderId})`);
    if (!orders.has(charge.orderId)) violations.push(`charge ${charge.intentId} is for an order that does not exist (${charge.orderId})`);
  }
  const perCoupon = new Map<string, number>();
  for (const order of tables.orders) {
    if (order.coupon_id !== null && order.status !== 'CANCELED') perCoupon.set(order.coupon_id, (perCoupon.get(order.coupon_id) ?? 0) + 1);
  }
  for (const [coupon, count] of perCoupon) if (count > 1) violations.push(`coupon ${coupon} pays ${count} orders`);
  for (const held of tables.heldCoupons) {
    if (settled) violations.push(`coupon ${held.id} is still HELD`);
    if (orders.get(held.held_by_order_id)?.status !== 'PENDING_PAYMENT') violations.push(`coupon ${held.id} is held by a settled order`);
  }
  return violations;
}
