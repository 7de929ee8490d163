import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { badInput, notFound, TryAgainError } from '../../core/errors.js';
import { runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import type { Logger } from '../../core/logger.js';
import { shortReason, type PaymentProvider, type RefundAnswer, type RefundRequest, type ReportedRefund } from '../payments/provider.js';
import { currentOrder, toOrder, type Order, type OrderColumns } from './orders.js';
import { isRecorded, lockOrderForRefunds, recordOwnRefundMade } from './refund-made.js';
import { failureCodeOf, REFUND_ID } from './verify.js';

/**
 * Refunds of a paid order (docs/design.md §11): compensation after success, with a key of its own
 * and recorded like a charge. Transaction 1 reserves the refund on the order's row (its amount
 * counts against what is left to refund from then on, so two refunds at once can never pass the
 * charge); the call to the provider holds nothing; transaction 2 records what the provider made,
 * conditionally on the refund still pending, so a resend, the request and the reconciler record it
 * once. A refund whose answer was lost is asked again with its key while the key is young, and
 * found among the PaymentIntent's refunds by its id after that: it is made once.
 */

export interface RefundOrderRequest {
  tenantId: string;
  orderId: string;
  /** Made by the caller: the refund's id, and its key (`refund-<id>`). */
  refundId: string;
  /** Null: what is left of the charge. */
  amountYen: number | null;
  /** When the reconciler may first ask again (PAYMENTS_RECONCILE_AFTER_MS). */
  reconcileAfterMs: number;
}

/** What refundOrder's transaction 1 committed: the order as it stood, and the refund to ask for. It is the stored response of a keyed request. */
export interface RefundReservation {
  order: Order;
  refund: RefundRequest;
}

const refundKeyOf = (refundId: string) => `refund-${refundId}`;

/** What refundOrder's audit row names: the order and the refund. */
export const refundEntities = (reservation: RefundReservation): string[] => [reservation.order.id, reservation.refund.refundId];

/**
 * Transaction 1 of a refund: the order's row is locked first (two refunds of one order queue on
 * it), then what is left is the charge less the refunds made and those reserved and not yet known.
 * Refused before anything reaches the provider: an order that is not PAID, nothing left, an amount
 * beyond what is left (BAD_USER_INPUT); another tenant's order is NOT_FOUND.
 */
export async function reserveRefund(trx: Transaction<DB>, request: RefundOrderRequest): Promise<RefundReservation> {
  const { tenantId, orderId, refundId } = request;
  const row = await sql<OrderColumns & { reserved_yen: number }>`
    select o.*, (select coalesce(sum(r.amount_yen), 0)::int from refunds r
                  where r.tenant_id = o.tenant_id and r.order_id = o.id and r.status = 'pending') as reserved_yen
      from orders o where o.tenant_id = ${tenantId} and o.id = ${orderId} for update of o`.execute(trx);
  const found = row.rows[0];
  if (!found) throw notFound('Order');
  const order = toOrder(found);
  if (order.status !== 'PAID' || order.paymentIntentId === null) {
    throw badInput(`only a PAID order with a charge can be refunded; this one is ${order.status}`, 'orderId');
  }
  const left = order.chargedYen - order.refundedYen - found.reserved_yen;
  const amountYen = request.amountYen ?? left;
  if (left <= 0) throw badInput('nothing is left to refund: the charge is refunded, or its refunds are on their way', 'orderId');
  if (amountYen < 1 || amountYen > left) throw badInput(`amountYen must be 1 to ${left} (what is left to refund)`, 'amountYen');
  const idempotencyKey = refundKeyOf(refundId);
  await sql`
    insert into refunds (tenant_id, id, order_id, idempotency_key, amount_yen, next_attempt_at)
    values (${tenantId}, ${refundId}, ${orderId}, ${idempotencyKey}, ${amountYen},
            now() + make_interval(secs => ${request.reconcileAfterMs / 1000}))`.execute(trx);
  return { order, refund: { idempotencyKey, tenantId, orderId, refundId, paymentIntentId: order.paymentIntentId, amountYen } };
}

/** Why a reported refund is not this one, or null when it is. */
function refundMismatch(refund: ReportedRefund, request: RefundRequest): string | null {
  if (refund.id === null || !REFUND_ID.test(refund.id)) return 'its id is not a refund id';
  if (refund.paymentIntentId !== request.paymentIntentId) return 'it refunds another PaymentIntent';
  if (refund.amount !== request.amountYen) return `its amount is ${refund.amount}, the refund's ${request.amountYen}`;
  if (refund.refundId !== request.refundId) return 'its metadata names another refund';
  return null;
}

/**
 * Made: the refund succeeded, recorded once (refund-made.ts) after the order's row is locked (the
 * lock order of transaction 1). One that records nothing was recorded before, by whoever learnt it
 * first (the request, a resend, the reconciler, a webhook's list), and the order is answered as it
 * stands; or its provider refund id is counted already, under a refund found at the provider with
 * its metadata gone (it is settled, so that nobody asks about it again and it counts once); or it
 * would pass the charge, which only a provider that lies answers (left pending, asked again).
 */
async function recordRefunded(trx: Transaction<DB>, request: RefundRequest, providerRefundId: string): Promise<Order> {
  const { tenantId, orderId, refundId } = request;
  await lockOrderForRefunds(trx, tenantId, orderId);
  const made = await recordOwnRefundMade(trx, { tenantId, refundId, providerRefundId });
  if (made) return made;
  if (await isRecorded(trx, tenantId, providerRefundId)) return recordRefundFailed(trx, request, ALREADY_RECORDED);
  return recordRefundUnknown(trx, request, `the refund ${providerRefundId} does not fit what is left of the charge`);
}

/** The failure code of a refund whose provider refund id another refund of the order records: it counts there. */
const ALREADY_RECORDED = 'already_recorded';

/** Refused by the provider for good: no refund was made, and its reservation is given back. */
async function recordRefundFailed(trx: Transaction<DB>, request: RefundRequest, failureCode: string): Promise<Order> {
  await sql`
    update refunds set status = 'failed', failure_code = ${shortReason(failureCode)}, settled_at = now()
     where tenant_id = ${request.tenantId} and id = ${request.refundId} and status = 'pending'`.execute(trx);
  return currentOrder(trx, request.tenantId, request.orderId);
}

async function recordRefundUnknown(trx: Transaction<DB>, request: RefundRequest, reason: string): Promise<Order> {
  await sql`
    update refunds set last_error = ${shortReason(reason)}
     where tenant_id = ${request.tenantId} and id = ${request.refundId} and status = 'pending'`.execute(trx);
  return currentOrder(trx, request.tenantId, request.orderId);
}

/** Transaction 2 of a refund: what one answer says, recorded (nothing is believed that does not match the refund). */
export function recordRefundAnswer(trx: Transaction<DB>, request: RefundRequest, answer: RefundAnswer): Promise<Order> {
  if (answer.kind === 'rejected') return recordRefundFailed(trx, request, failureCodeOf(answer.failureCode) ?? 'refund_rejected');
  if (answer.kind !== 'refund') return recordRefundUnknown(trx, request, answer.reason);
  const mismatch = refundMismatch(answer.refund, request);
  if (mismatch !== null) return recordRefundUnknown(trx, request, `the refund does not match: ${mismatch}`);
  const { status } = answer.refund;
  if (status === 'succeeded' || status === 'pending') return recordRefunded(trx, request, answer.refund.id!);
  if (status === 'failed' || status === 'canceled')
    return recordRefundFailed(trx, request, failureCodeOf(answer.refund.failureCode) ?? status);
  return recordRefundUnknown(trx, request, `refund is ${String(status).slice(0, 40)}`);
}

/** The pending refund of a keyed resend, or null once it is settled. */
export async function pendingRefund(
  trx: Transaction<DB>,
  request: RefundRequest,
  reconcileForMs: number,
): Promise<{ keyYoung: boolean } | null> {
  const row = await sql<{ key_young: boolean }>`
    select created_at > now() - make_interval(secs => ${reconcileForMs / 1000}) as key_young
      from refunds where tenant_id = ${request.tenantId} and id = ${request.refundId} and status = 'pending'`.execute(trx);
  return row.rows[0] ? { keyYoung: row.rows[0].key_young } : null;
}

export interface RefundReconcileDeps {
  db: Kysely<DB>;
  transactions: TransactionSettings;
  provider: PaymentProvider;
  log: Logger;
  options: { timeoutMs: number; reconcileAfterMs: number; reconcileForMs: number; batchSize: number };
}

interface DueRefund {
  tenant_id: string;
  id: string;
  order_id: string;
  idempotency_key: string;
  amount_yen: number;
  payment_intent_id: string;
  key_young: boolean;
}

/** The same claim as the payments' (reconciler.ts): SKIP LOCKED, committed at once, next look moved past a doubling wait. */
async function claimDueRefunds(deps: RefundReconcileDeps, deadline: number): Promise<DueRefund[]> {
  const { reconcileAfterMs, reconcileForMs, timeoutMs, batchSize } = deps.options;
  const { value } = await runInTransaction(deps.db, deps.transactions, { deadline }, async (trx) => {
    const claimed = await sql<DueRefund>`
      update refunds r
         set resends = r.resends + 1,
             next_attempt_at = now() + make_interval(secs => greatest(${(2 * timeoutMs) / 1000}::float8,
                                 least(3600::float8, ${reconcileAfterMs / 1000}::float8 * power(2, least(r.resends, 20)))))
        from (select tenant_id, id from refunds where status = 'pending' and next_attempt_at <= now()
               order by next_attempt_at, id limit ${batchSize} for update skip locked) due, orders o
       where r.tenant_id = due.tenant_id and r.id = due.id and o.tenant_id = r.tenant_id and o.id = r.order_id
      returning r.tenant_id, r.id, r.order_id, r.idempotency_key, r.amount_yen, o.payment_intent_id,
                r.created_at > now() - make_interval(secs => ${reconcileForMs / 1000}) as key_young`.execute(trx);
    return claimed.rows;
  });
  return value;
}

/**
 * The refund's question: the create again with its key while the key is young; after that the
 * PaymentIntent's refunds, among which this one is found by its id (none: it was never made).
 */
export async function askAboutRefund(provider: PaymentProvider, request: RefundRequest, keyYoung: boolean, timeoutMs: number) {
  if (keyYoung) return provider.refund(request, timeoutMs);
  const listed = await provider.listRefunds(request.paymentIntentId, timeoutMs);
  if (listed.kind !== 'found') return listed;
  const mine = listed.refunds.find((refund) => refund.refundId === request.refundId);
  return mine ? { kind: 'refund' as const, refund: mine } : { kind: 'rejected' as const, failureCode: 'no_refund_found' };
}

/** One pass over refunds whose outcome is not known: how many were asked about. */
export async function reconcileRefunds(deps: RefundReconcileDeps): Promise<number> {
  const deadline = Date.now() + 10_000;
  const due = await claimDueRefunds(deps, deadline);
  await Promise.all(
    due.map(async (refund) => {
      const request: RefundRequest = {
        idempotencyKey: refund.idempotency_key,
        tenantId: refund.tenant_id,
        orderId: refund.order_id,
        refundId: refund.id,
        paymentIntentId: refund.payment_intent_id,
        amountYen: refund.amount_yen,
      };
      const answer = await askAboutRefund(deps.provider, request, refund.key_young, deps.options.timeoutMs);
      try {
        await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + 10_000 }, (trx) =>
          recordRefundAnswer(trx, request, answer),
        );
      } catch (error) {
        if (!(error instanceof TryAgainError)) throw error;
        deps.log.warn({ refundId: refund.id, reason: error.reason }, 'reconciler: a refund could not be recorded; asked again when due');
      }
    }),
  );
  return due.length;
}
