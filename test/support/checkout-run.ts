import { print } from 'graphql';
import type pg from 'pg';
import { CheckoutDocument, CreateCampaignDocument, IssueCouponDocument } from '../generated/graphql.js';
import { LoadClient, runReleasedTogether } from '../load/client.js';
import { asTenantAdmin, asUser, gqlOk, type TestBackend } from './harness.js';
import { waitFor } from './wait.js';
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
  orders: {
    id: string;
    status: string;
    charged_yen: number;
    refunded_yen: number;
    coupon_id: string | null;
    payment_intent_id: string | null;
  }[];
  /** Events per order id and topic. */
  events: Map<string, Map<string, number>>;
  /** coupon.redeemed events per coupon id. */
  couponRedeemed: Map<string, number>;
  /** coupon.redeemed events per order id (a coupon given back by a refund pays a later order too). */
  couponRedeemedFor: Map<string, number>;
  heldCoupons: { id: string; held_by_order_id: string }[];
  redeemedCoupons: Set<string>;
  /** The refunds recorded as made (succeeded), by this server's refundOrder or found at the provider. */
  refunds: { order_id: string; provider_refund_id: string | null; amount_yen: number; origin: string }[];
}

/** The tenant's orders, events and coupons as committed, counted with SQL. */
export async function readCheckoutTables(sql: pg.Pool, tenantId: string): Promise<CheckoutTables> {
  const orders = await sql.query<CheckoutTables['orders'][number]>(
    'select id, status, charged_yen, refunded_yen, coupon_id, payment_intent_id from orders where tenant_id = $1',
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
  const redeemedEvents = await sql.query<{ coupon_id: string; order_id: string | null; n: number }>(
    `select payload->>'couponId' as coupon_id, payload->>'orderId' as order_id, count(*)::int as n
       from outbox_events where tenant_id = $1 and topic = 'coupon.redeemed' group by 1, 2`,
    [tenantId],
  );
  const sum = (rows: { key: string | null; n: number }[]) => {
    const sums = new Map<string, number>();
    for (const row of rows) if (row.key !== null) sums.set(row.key, (sums.get(row.key) ?? 0) + row.n);
    return sums;
  };
  const coupons = await sql.query<{ id: string; held_by_order_id: string | null; redeemed_at: Date | null }>(
    'select id, held_by_order_id, redeemed_at from coupons where tenant_id = $1',
    [tenantId],
  );
  const refunds = await sql.query<CheckoutTables['refunds'][number]>(
    "select order_id, provider_refund_id, amount_yen, origin from refunds where tenant_id = $1 and status = 'succeeded'",
    [tenantId],
  );
  return {
    refunds: refunds.rows,
    orders: orders.rows,
    events: byOrder,
    couponRedeemed: sum(redeemedEvents.rows.map((row) => ({ key: row.coupon_id, n: row.n }))),
    couponRedeemedFor: sum(redeemedEvents.rows.map((row) => ({ key: row.order_id, n: row.n }))),
    heldCoupons: coupons.rows.filter((c) => c.held_by_order_id !== null) as CheckoutTables['heldCoupons'],
    redeemedCoupons: new Set(coupons.rows.filter((c) => c.redeemed_at !== null).map((c) => c.id)),
  };
}

/**
 * What must hold whatever failed, read from the tables and the stub's ledger: a PAID (or REFUNDED)
 * order has exactly one succeeded charge of its chargedYen (none when it charged 0) and a
 * refundedYen equal to the refunds the stub made for it, a CANCELED order no charge, no charge
 * exists without its PAID order, a coupon pays at most one PAID order and is redeemed exactly when
 * its order is PAID, one order.paid or order.canceled event per settled order, every refund the
 * provider made recorded once by its id (one order.refunded event each). With `settled`, also
 * that nothing is left PENDING_PAYMENT and no coupon is HELD.
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
    const refunded = stub.refunds.filter((refund) => refund.orderId === order.id).reduce((sum, refund) => sum + refund.amountYen, 0);
    if (refunded !== order.refunded_yen)
      violations.push(`order ${order.id} says ${order.refunded_yen} yen refunded, the provider ${refunded}`);
    if (order.status === 'PAID' || order.status === 'REFUNDED') {
      const expected = order.charged_yen > 0 ? [order.charged_yen] : [];
      if (JSON.stringify(made) !== JSON.stringify(expected))
        violations.push(`PAID order ${order.id} has charges [${made}], not [${expected}]`);
      if (topics.get('order.paid') !== 1 || topics.has('order.canceled'))
        violations.push(`PAID order ${order.id} has events ${JSON.stringify([...topics])}`);
      if (
        order.status === 'PAID' &&
        order.coupon_id !== null &&
        (!tables.redeemedCoupons.has(order.coupon_id) || tables.couponRedeemedFor.get(order.id) !== 1)
      )
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
    if (!['PAID', 'REFUNDED'].includes(orders.get(charge.orderId)?.status ?? '') && settled)
      violations.push(`charge ${charge.intentId} has no PAID order (${charge.orderId})`);
    if (!orders.has(charge.orderId)) violations.push(`charge ${charge.intentId} is for an order that does not exist (${charge.orderId})`);
  }
  violations.push(...refundViolations(tables, stub, new Set(orders.keys())));
  const perCoupon = new Map<string, number>();
  for (const order of tables.orders) {
    if (order.coupon_id !== null && (order.status === 'PAID' || order.status === 'PENDING_PAYMENT'))
      perCoupon.set(order.coupon_id, (perCoupon.get(order.coupon_id) ?? 0) + 1);
  }
  for (const [coupon, count] of perCoupon) if (count > 1) violations.push(`coupon ${coupon} pays ${count} orders`);
  for (const held of tables.heldCoupons) {
    if (settled) violations.push(`coupon ${held.id} is still HELD`);
    if (orders.get(held.held_by_order_id)?.status !== 'PENDING_PAYMENT') violations.push(`coupon ${held.id} is held by a settled order`);
  }
  return violations;
}

/**
 * Every refund the provider made for the tenant's orders recorded exactly once, by its refund id,
 * with its amount; nothing recorded as made that the provider did not make; one order.refunded
 * event per refund recorded.
 */
function refundViolations(tables: CheckoutTables, stub: StripeStub, orderIds: Set<string>): string[] {
  const violations: string[] = [];
  const recorded = new Map<string, CheckoutTables['refunds']>();
  for (const refund of tables.refunds)
    recorded.set(refund.provider_refund_id ?? '', [...(recorded.get(refund.provider_refund_id ?? '') ?? []), refund]);
  const made = stub.refunds.filter((refund) => orderIds.has(refund.orderId));
  for (const refund of made) {
    const rows = recorded.get(refund.id) ?? [];
    if (rows.length !== 1 || rows[0]!.amount_yen !== refund.amountYen || rows[0]!.order_id !== refund.orderId)
      violations.push(`refund ${refund.id} of ${refund.amountYen} yen at the provider is recorded ${JSON.stringify(rows)}`);
  }
  const atProvider = new Set(made.map((refund) => refund.id));
  for (const refund of tables.refunds)
    if (!atProvider.has(refund.provider_refund_id ?? '')) violations.push(`refund ${JSON.stringify(refund)} was not made at the provider`);
  for (const orderId of orderIds) {
    const events = tables.events.get(orderId)?.get('order.refunded') ?? 0;
    const refunds = tables.refunds.filter((refund) => refund.order_id === orderId).length;
    if (events !== refunds) violations.push(`order ${orderId} has ${refunds} refunds and ${events} order.refunded events`);
  }
  return violations;
}

/** One call's limit, and a slow request's execution past it; the machine's other work stays well within the limit. */
export const FAULT_SETTINGS = { PAYMENTS_TIMEOUT_MS: '2000', PAYMENTS_RECONCILE_AFTER_MS: '100' };
export const STUB_SLOW_MS = 3_000;

/** The payment methods of the fault scenario: each with the outcome it ends in, once everything is settled. */
const FAULT_METHODS = [
  'pm_card_visa',
  'pm_card_chargeDeclined',
  // Executes past PAYMENTS_TIMEOUT_MS: the charge is made after the request gave up.
  'pm_card_visa__slow',
  'pm_card_visa__lost502',
  'pm_card_visa__reset',
  'pm_card_chargeDeclined__lost502',
  // A 5xx before anything executed, for the first two requests: the request's and the first resend's.
  'pm_card_visa__error500_2',
] as const;

export interface FaultScenarioResult {
  requests: number;
  /** Answer statuses (or error codes) by count. */
  answers: Record<string, number>;
  /** The same, by kind of request. */
  byLabel: Record<string, number>;
  /** TRY_AGAIN answers by their reason (extensions.reason): what ran out. */
  tryAgainReasons: Record<string, number>;
  /** Answers that contradict the order as finally committed (a PAID answer for an order not PAID, …). */
  contradictions: string[];
  /** The slowest answer, against the request's deadline. */
  slowestMs: number;
  /** What the tables and the stub's ledger showed once every request was answered, and after the reconciler. */
  violationsAnswered: string[];
  violationsSettled: string[];
  /** Reconciler passes it took until nothing was pending (or the limit). */
  passes: number;
}

/**
 * Members each with a coupon send checkouts released together over real HTTP, every fault of
 * FAULT_METHODS among them, plus two checkouts per member racing for the member's one coupon, and
 * keyed pairs sent twice with one key while the first still waits on the provider (the second meets
 * a 409 in flight). Once all are answered the tables and the stub are counted; then the
 * reconciler runs, pass after pass, until nothing is pending, and they are counted again.
 */
export async function runFaultScenario(
  backend: TestBackend & { url: string },
  stub: StripeStub,
  options: { tenantId: string; members: number; reconcile: () => Promise<unknown>; maxPasses?: number },
): Promise<FaultScenarioResult> {
  const { tenantId } = options;
  const members = Array.from({ length: options.members }, (_, i) => `buyer-${i}`);
  const coupons = await issueCoupons(backend, tenantId, 'faults', 300, members);
  type Send = { label: string; member: string; variables: Record<string, unknown>; key?: string };
  const sends: Send[] = [];
  members.forEach((member, i) => {
    const method = FAULT_METHODS[i % FAULT_METHODS.length]!;
    sends.push({ label: method, member, variables: { input: { amountYen: 1_000 + i, couponId: coupons[i], paymentMethod: method } } });
    // The same coupon in a second order at the same moment: at most one of them may have it.
    sends.push({
      label: 'pm_card_visa (same coupon)',
      member,
      variables: { input: { amountYen: 2_000 + i, couponId: coupons[i], paymentMethod: 'pm_card_visa' } },
    });
    if (i % 4 === 0) {
      // One purchase sent twice with one key, slow at the provider: the second waits for the first's
      // transaction 1, then meets its call in flight (409).
      const variables = { input: { amountYen: 3_000 + i, paymentMethod: 'pm_card_visa__slow' } };
      for (const copy of [1, 2]) sends.push({ label: `keyed slow #${copy}`, member, variables, key: `${tenantId}-${member}-twice` });
    }
  });
  const client = new LoadClient(backend.url, sends.length, { requestTimeoutMs: 60_000 });
  const query = print(CheckoutDocument);
  try {
    await client.open();
    const replies = await runReleasedTogether(
      sends.map((send) => async () => {
        const headers = { ...asUser(tenantId, send.member), ...(send.key ? { 'idempotency-key': send.key } : {}) };
        return { send, reply: await client.graphql(query, send.variables, headers) };
      }),
      sends.length,
    );
    const answers: Record<string, number> = {};
    const byLabel: Record<string, number> = {};
    let slowestMs = 0;
    const answered: { send: Send; status: string; orderId: string | null }[] = [];
    const tryAgainReasons: Record<string, number> = {};
    for (const { send, reply } of replies) {
      slowestMs = Math.max(slowestMs, reply.latencyMs);
      const answer = reply.body.data?.['checkout'] as { status: string; order: { id: string } | null } | undefined;
      const status = answer?.status ?? String(reply.body.errors?.[0]?.extensions?.['code'] ?? `HTTP ${reply.status}`);
      answers[status] = (answers[status] ?? 0) + 1;
      byLabel[`${send.label} ${status}`] = (byLabel[`${send.label} ${status}`] ?? 0) + 1;
      answered.push({ send, status, orderId: answer?.order?.id ?? null });
      if (status === 'TRY_AGAIN') {
        const reason = String(reply.body.errors?.[0]?.extensions?.['reason'] ?? 'none');
        tryAgainReasons[reason] = (tryAgainReasons[reason] ?? 0) + 1;
      }
    }
    const violationsAnswered = checkoutViolations(await readCheckoutTables(backend.sql, tenantId), stub, tenantId, false);
    let passes = 0;
    for (; passes < (options.maxPasses ?? 20); passes++) {
      const pending = await backend.sql.query("select 1 from orders where tenant_id = $1 and status = 'PENDING_PAYMENT'", [tenantId]);
      if (pending.rowCount === 0) break;
      // As time passes for a reconciler: what the provider was still executing has finished (a resend
      // meanwhile would meet its 409 again), and every payment is due now, without waiting out
      // PAYMENTS_RECONCILE_AFTER_MS and the resends' doubling.
      await waitFor(() => (stub.inFlight === 0 ? true : undefined), 'the stub to finish what it executes', 30_000);
      await backend.sql.query("update payment_intents set next_attempt_at = now() where tenant_id = $1 and status = 'pending'", [tenantId]);
      await options.reconcile();
    }
    const tables = await readCheckoutTables(backend.sql, tenantId);
    const statusOf = new Map(tables.orders.map((order) => [order.id, order.status]));
    const contradictions = answered.flatMap(({ send, status, orderId }) => {
      const final = orderId === null ? null : statusOf.get(orderId);
      const expected: Record<string, string> = { PAID: 'PAID', DECLINED: 'CANCELED' };
      if (expected[status] && final !== expected[status]) return [`${send.label}: answered ${status}, the order is ${final}`];
      if (status === 'COUPON_UNAVAILABLE' && orderId !== null) return [`${send.label}: COUPON_UNAVAILABLE with an order`];
      return [];
    });
    // Each keyed pair is one order (a TRY_AGAIN wrote nothing and names none).
    const pairs = new Map<string, Set<string | null>>();
    for (const { send, status, orderId } of answered) {
      if (send.key && status !== 'TRY_AGAIN') pairs.set(send.key, (pairs.get(send.key) ?? new Set()).add(orderId));
    }
    for (const [key, orders] of pairs) if (orders.size !== 1) contradictions.push(`key ${key} answered ${orders.size} different orders`);
    return {
      requests: sends.length,
      answers,
      byLabel,
      tryAgainReasons,
      contradictions,
      slowestMs,
      violationsAnswered,
      violationsSettled: checkoutViolations(tables, stub, tenantId, true),
      passes,
    };
  } finally {
    client.close();
  }
}
