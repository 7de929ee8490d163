import { sql, type Transaction } from 'kysely';
import { TryAgainError } from '../../core/errors.js';
import type { DB } from '../../db/schema.js';
import type { ReportedIntent, ReportedRefund } from '../payments/provider.js';
import { settleAnswer, type OutcomeDeps } from './outcome.js';
import { loadPayment, type PaymentState } from './pending.js';
import { isRecorded, lockOrderForRefunds, recordFoundRefund, recordOwnRefundMade } from './refund-made.js';
import { intentMismatch, isUuid, orderNamedBy, REFUND_ID } from './verify.js';

/**
 * The refunds the provider made for an order, whoever made them (docs/design.md §11): refundOrder's
 * own, and those made in Stripe's dashboard or by another client of the account. This server learns
 * of them from Stripe's own word, never from an event's body: a refund event (webhook.ts) has the
 * PaymentIntent's refunds listed, and the reconciler's sweep (refund-sweep.ts) lists the account's
 * refunds by creation time; either way each list comes with its PaymentIntent, whose metadata names
 * the order, and which must match the order before anything is recorded from it. Every refund is
 * counted once, by Stripe's refund id (refund-made.ts): one of this server's own whose answer has
 * not come back yet (named by its metadata.refund_id, still pending) is settled as made, never
 * counted beside itself; the rest are recorded as found. No call is made with a transaction held.
 */

/** What one list came to for its order: refunds recorded now, and why listed ones were not believed (logged). */
interface ListedRefunds {
  recorded: number;
  refused: string[];
}

/** The order a list of refunds is recorded against, and its PaymentIntent. */
interface RefundedOrder {
  tenantId: string;
  orderId: string;
  intentId: string;
}

/** How a list of one order's refunds is recorded, inside one transaction (a naive twin counts them otherwise). */
export type RecordListed = (trx: Transaction<DB>, order: RefundedOrder, refunds: ReportedRefund[]) => Promise<ListedRefunds>;

/** What asking about refunds came to. Not `done`: ask again later (the event is answered 503; the sweep holds its place). */
export interface RefundSync {
  done: boolean;
  result: string;
  recorded: number;
}

export interface RefundSyncDeps {
  outcome: OutcomeDeps;
  /** PAYMENTS_RECONCILE_FOR, for the payment's state (pending.ts). */
  reconcileForMs: number;
  recordListed: RecordListed;
}

/** Stripe counts a pending refund as refunded (and so does refundOrder); a failed or canceled one made nothing. */
export const isMade = (refund: ReportedRefund) => refund.status === 'succeeded' || refund.status === 'pending';

/** Why a listed refund is not one of this PaymentIntent's, or null. */
function listedMismatch(refund: ReportedRefund, intentId: string): string | null {
  if (refund.id === null || !REFUND_ID.test(refund.id)) return 'a listed refund has no refund id';
  if (refund.paymentIntentId !== intentId) return `${refund.id} refunds another PaymentIntent`;
  if (refund.amount === null || !Number.isInteger(refund.amount) || refund.amount < 1) return `${refund.id} has no amount of whole yen`;
  return null;
}

const oldestFirst = (refunds: ReportedRefund[]) => [...refunds].sort((a, b) => (a.created ?? 0) - (b.created ?? 0));

/** This server's refund a listed one names by its metadata, while its outcome is not known. */
async function pendingOwn(trx: Transaction<DB>, tenantId: string, refundId: string) {
  const { rows } = await sql<{ order_id: string; amount_yen: number }>`
    select order_id, amount_yen from refunds where tenant_id = ${tenantId} and id = ${refundId} and status = 'pending'`.execute(trx);
  return rows[0];
}

/** One listed refund not recorded yet: this server's own settled as made, or recorded as found. True when recorded. */
async function recordOne(trx: Transaction<DB>, order: RefundedOrder, refund: ReportedRefund, refused: string[]): Promise<boolean> {
  const providerRefundId = refund.id!;
  const own = isUuid(refund.refundId) ? await pendingOwn(trx, order.tenantId, refund.refundId) : undefined;
  if (own) {
    if (own.order_id !== order.orderId || own.amount_yen !== refund.amount) {
      refused.push(`${providerRefundId} names a refund of this server that it does not match`);
      return false;
    }
    return (await recordOwnRefundMade(trx, { tenantId: order.tenantId, refundId: refund.refundId!, providerRefundId })) !== undefined;
  }
  const found = await recordFoundRefund(trx, { ...order, providerRefundId, amountYen: refund.amount! });
  if (!found) refused.push(`${providerRefundId} of ${refund.amount} yen passes what is left of the charge`);
  return found !== undefined;
}

/**
 * The design's way: the order's row locked first, then each refund made and not known by its
 * provider id recorded, oldest first (one order.refunded event each).
 */
export const recordListedRefunds: RecordListed = async (trx, order, refunds) => {
  const result: ListedRefunds = { recorded: 0, refused: [] };
  const locked = await lockOrderForRefunds(trx, order.tenantId, order.orderId);
  if (locked?.paymentIntentId !== order.intentId) return result;
  for (const refund of oldestFirst(refunds).filter(isMade)) {
    const mismatch = listedMismatch(refund, order.intentId);
    if (mismatch !== null) result.refused.push(mismatch);
    else if (!(await isRecorded(trx, order.tenantId, refund.id!)) && (await recordOne(trx, order, refund, result.refused)))
      result.recorded++;
  }
  return result;
};

const done = (result: string, recorded = 0): RefundSync => ({ done: true, result, recorded });
const notDone = (result: string): RefundSync => ({ done: false, result, recorded: 0 });

/** A transaction of the outcome's deps, or null when it could not commit (TRY_AGAIN): asked again later. */
async function attempt<T>(deps: RefundSyncDeps, work: (trx: Transaction<DB>) => Promise<T>): Promise<T | null> {
  try {
    return await deps.outcome.inTransaction(work);
  } catch (error) {
    if (!(error instanceof TryAgainError)) throw error;
    return null;
  }
}

/**
 * The order as it stands, its payment settled first when it is still pending: a refund says the
 * charge succeeded, and the PaymentIntent the list described settles it as any answer would
 * (outcome.ts), matched against the order.
 */
async function settledOrder(
  deps: RefundSyncDeps,
  where: { tenantId: string; orderId: string },
  intent: ReportedIntent,
): Promise<PaymentState | 'no order' | 'try again'> {
  const load = async () => {
    const read = await attempt(deps, async (trx) => ({ state: await loadPayment(trx, where, deps.reconcileForMs) }));
    return read === null ? 'try again' : (read.state ?? 'no order');
  };
  const state = await load();
  if (typeof state === 'string' || !state.payment || state.payment.setAside) return state;
  await settleAnswer(deps.outcome, state.payment, { kind: 'intent', intent, failureCode: null });
  return load();
}

/**
 * Records an order's refunds as a list showed them: the order is the one the PaymentIntent's
 * metadata names, and the PaymentIntent must match it (id, amount, currency, order, tenant). A
 * PaymentIntent that names no order of this server (another client's charge) records nothing.
 */
export async function recordOrderRefunds(deps: RefundSyncDeps, intent: ReportedIntent, refunds: ReportedRefund[]): Promise<RefundSync> {
  const where = orderNamedBy(intent);
  if (where === null || intent.id === null) return done('names no order of this server');
  const state = await settledOrder(deps, where, intent);
  if (state === 'try again') return notDone('the order could not be read now');
  if (state === 'no order') return done('names no order of this server');
  const { order, payment } = state;
  if (order.status !== 'PAID' && order.status !== 'REFUNDED') {
    if (order.status === 'CANCELED' && refunds.some(isMade))
      deps.outcome.log.error(
        { orderId: order.id, intentId: intent.id },
        'refunds: a PaymentIntent of a CANCELED order was charged and refunded',
      );
    return payment && !payment.setAside
      ? notDone('its order is still PENDING_PAYMENT')
      : done(`order ${order.status}: no refunds recorded`);
  }
  const mismatch = intentMismatch(intent, { ...where, amountYen: order.chargedYen, intentId: order.paymentIntentId });
  if (mismatch !== null) {
    deps.outcome.refused(deps.outcome.onMismatch === 'log' ? 'webhook' : 'answer');
    deps.outcome.log.warn({ orderId: order.id, mismatch }, 'refunds: a PaymentIntent that does not match its order records no refund');
    return done('its PaymentIntent does not match the order');
  }
  return recordInChunks(deps, { ...where, intentId: intent.id }, refunds);
}

/**
 * Refunds recorded in one transaction at most: each transaction holds the order's row, and one
 * charge refunded a thousand times must neither hold it for long nor pass a transaction's deadline
 * on a busy machine at every sweep (its refunds never recorded). Oldest first, so what a failed
 * chunk leaves is the newest, and is asked for again.
 */
const REFUNDS_PER_TRANSACTION = 100;

async function recordInChunks(deps: RefundSyncDeps, order: RefundedOrder, refunds: ReportedRefund[]): Promise<RefundSync> {
  const sorted = oldestFirst(refunds);
  const listed: ListedRefunds = { recorded: 0, refused: [] };
  let failed = false;
  for (let at = 0; at < sorted.length && !failed; at += REFUNDS_PER_TRANSACTION) {
    const chunk = await attempt(deps, (trx) => deps.recordListed(trx, order, sorted.slice(at, at + REFUNDS_PER_TRANSACTION)));
    failed = chunk === null;
    listed.recorded += chunk?.recorded ?? 0;
    listed.refused.push(...(chunk?.refused ?? []));
  }
  if (listed.refused.length > 0) {
    deps.outcome.refused(deps.outcome.onMismatch === 'log' ? 'webhook' : 'answer');
    deps.outcome.log.warn(
      { orderId: order.orderId, refused: listed.refused.slice(0, 10) },
      'refunds: listed refunds that do not match are not recorded',
    );
  }
  if (failed) return { done: false, result: 'the refunds could not be recorded now', recorded: listed.recorded };
  return done(`settled: ${listed.recorded} refunds recorded`, listed.recorded);
}

/**
 * What a refund event does (charge.refunded, refund.created, refund.updated): the PaymentIntent's
 * refunds asked for (GET /v1/refunds?payment_intent=…, its PaymentIntent expanded), with nothing
 * held, and recorded. The event's own body is only the signal: what is recorded is the list.
 */
export async function recordRefundsOfIntent(deps: RefundSyncDeps, intentId: string): Promise<RefundSync> {
  const listed = await deps.outcome.ask((timeoutMs) => deps.outcome.provider.listRefunds(intentId, timeoutMs));
  if (listed === null) return notDone('no time left to ask for the refunds');
  if (listed.kind === 'unknown') return notDone(`the refunds could not be listed: ${listed.reason}`);
  if (listed.kind === 'refused') {
    deps.outcome.log.error({ intentId, reason: listed.reason }, 'refunds: the list of a PaymentIntent’s refunds could not be read');
    return done(`the refunds could not be read: ${listed.reason}`);
  }
  if (listed.refunds.length === 0) return done('no refunds listed');
  const intent = listed.refunds.find((refund) => refund.intent?.id === intentId)?.intent;
  return intent ? recordOrderRefunds(deps, intent, listed.refunds) : done('the list did not describe the PaymentIntent');
}
