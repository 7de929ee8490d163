import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, OrderRow, OrderStatus } from '../../db/schema.js';

/** An order as the API shows it (docs/design.md §11). */
export interface Order {
  id: string;
  memberId: string;
  status: OrderStatus;
  amountYen: number;
  /** The coupon's value (0 without one); it may exceed the amount. */
  discountYen: number;
  /** amountYen - discountYen, never below 0: what the provider is asked for. */
  chargedYen: number;
  couponId: string | null;
  /** The provider's PaymentIntent, once it settled the order. */
  paymentIntentId: string | null;
  createdAt: Date;
  /** What the provider refunded of the charge. */
  refundedYen: number;
  /** The provider's decline_code (or code) when the payment was declined or failed. */
  failureCode: string | null;
}

/** What was paid: the charge of a PAID or REFUNDED order (refunds are counted apart), nothing otherwise. */
export const paidYenOf = (order: Order): number => (order.status === 'PAID' || order.status === 'REFUNDED' ? order.chargedYen : 0);

export type OrderColumns = Pick<
  OrderRow,
  | 'id'
  | 'member_id'
  | 'status'
  | 'amount_yen'
  | 'discount_yen'
  | 'charged_yen'
  | 'coupon_id'
  | 'payment_intent_id'
  | 'created_at'
  | 'refunded_yen'
  | 'failure_code'
>;

export const toOrder = (row: OrderColumns): Order => ({
  id: row.id,
  memberId: row.member_id,
  status: row.status,
  amountYen: row.amount_yen,
  discountYen: row.discount_yen,
  chargedYen: row.charged_yen,
  couponId: row.coupon_id,
  paymentIntentId: row.payment_intent_id,
  createdAt: row.created_at,
  refundedYen: row.refunded_yen,
  failureCode: row.failure_code,
});

/** The order and what its events say of it: every order.* event carries this payload. */
export function orderPayload(alias: string, tenantId: string) {
  const o = sql.raw(alias);
  return sql`jsonb_build_object('orderId', ${o}.id, 'tenantId', ${tenantId}::text, 'memberId', ${o}.member_id, 'status', ${o}.status,
    'amountYen', ${o}.amount_yen, 'discountYen', ${o}.discount_yen, 'chargedYen', ${o}.charged_yen, 'couponId', ${o}.coupon_id,
    'paymentIntentId', ${o}.payment_intent_id)`;
}

export const ORDER_CREATED_TOPIC = 'order.created';
export const ORDER_PAID_TOPIC = 'order.paid';
export const ORDER_CANCELED_TOPIC = 'order.canceled';
export const ORDER_REFUNDED_TOPIC = 'order.refunded';

/** Who is asking: a member sees its own orders, the tenant's admin (memberId null) every order of the tenant. */
export interface OrderReader {
  tenantId: string;
  memberId: string | null;
}

export async function findOrder(db: Kysely<DB>, reader: OrderReader, orderId: string): Promise<Order | null> {
  let query = db.selectFrom('orders').selectAll().where('tenant_id', '=', reader.tenantId).where('id', '=', orderId);
  if (reader.memberId !== null) query = query.where('member_id', '=', reader.memberId);
  const row = await query.executeTakeFirst();
  return row ? toOrder(row) : null;
}

/** Newest first (the indexes orders_by_member and orders_by_tenant serve both). */
export async function listOrders(db: Kysely<DB>, reader: OrderReader, limit: number): Promise<Order[]> {
  let query = db.selectFrom('orders').selectAll().where('tenant_id', '=', reader.tenantId);
  if (reader.memberId !== null) query = query.where('member_id', '=', reader.memberId);
  const rows = await query.orderBy('created_at', 'desc').orderBy('id').limit(limit).execute();
  return rows.map(toOrder);
}

/** The order as the last committed outcome left it: what a transaction that lost the race to record one answers. */
export async function currentOrder(trx: Transaction<DB>, tenantId: string, orderId: string): Promise<Order> {
  const row = await trx
    .selectFrom('orders')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', orderId)
    .executeTakeFirstOrThrow();
  return toOrder(row);
}
