import { randomUUID } from 'node:crypto';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { defineMutation } from '../define-mutation.js';
import { requireYen } from '../validate.js';
import { OrderType } from './orders.js';
import { PAYMENT_CALL_MIN_MS, PAYMENT_RECORD_MARGIN_MS } from '../../core/config.js';
import { paymentsUnavailable } from '../../core/errors.js';
import { currentOrder, type Order } from '../../features/checkout/orders.js';
import {
  askAboutRefund,
  pendingRefund,
  recordRefundAnswer,
  refundEntities,
  reserveRefund,
  type RefundReservation,
} from '../../features/checkout/refunds.js';
import type { PaymentProvider } from '../../features/payments/provider.js';

/** Stripe takes amounts of up to eight digits. */
const AMOUNT_MAX_YEN = 99_999_999;

const RefundOrderInput = builder.inputType('RefundOrderInput', {
  fields: (t) => ({
    orderId: t.field({ type: 'UUID', description: 'A PAID order of your tenant.' }),
    amountYen: t.int({ required: false, description: 'The yen to refund, at most what is left of the charge; omitted: all that is left.' }),
  }),
});

const RefundOrderPayload = builder.objectRef<{ order: Order }>('RefundOrderPayload').implement({
  fields: (t) => ({
    order: t.expose('order', {
      type: OrderType,
      description: 'The order as it stands: refundedYen grown by the refund once the provider made it (REFUNDED once it is whole).',
    }),
  }),
});

/**
 * After transaction 1: the refund asked for with no transaction, connection or turn held, and what
 * the provider answered recorded. A keyed resend asks again, with the refund's key, while it is
 * pending and its key young; otherwise (settled, or left to the reconciler) it answers the order.
 */
async function settleRefund(reservation: RefundReservation, replayed: boolean, ctx: Context, provider: PaymentProvider): Promise<Order> {
  const { config } = ctx.services;
  const inTransaction = async <T>(work: Parameters<Context['database']['inTransaction']>[1]) =>
    (await ctx.database.inTransaction({ deadline: ctx.deadline }, work)).value as T;
  const { refund } = reservation;
  const pending = await inTransaction<{ keyYoung: boolean } | null>((trx) => pendingRefund(trx, refund, config.payments.reconcileForMs));
  const callMs = Math.min(config.payments.timeoutMs, ctx.deadline - Date.now() - PAYMENT_RECORD_MARGIN_MS);
  if (pending === null || callMs < PAYMENT_CALL_MIN_MS || (replayed && !pending.keyYoung)) {
    return inTransaction<Order>((trx) => currentOrder(trx, refund.tenantId, refund.orderId));
  }
  const { value: answer, back } = await ctx.turn.stepOut(() => askAboutRefund(provider, refund, pending.keyYoung, callMs));
  if (!back) return reservation.order;
  return inTransaction<Order>((trx) => recordRefundAnswer(trx, refund, answer));
}

defineMutation('refundOrder', {
  access: { tenantAdmin: true },
  description:
    "Refunds a PAID order of the tenant at the payment provider: amountYen of it, or all that is left. The order's refundedYen grows by " +
    'what the provider refunded (REFUNDED once it is whole, which gives the coupon back), with one order.refunded event per refund. ' +
    'A refund beyond what is left is BAD_USER_INPUT and reaches nobody. Honours Idempotency-Key: a resend is the same refund, made once.',
  input: RefundOrderInput,
  type: RefundOrderPayload,
  prepare: (input, { services }) => {
    if (services.payments === null) throw paymentsUnavailable();
    const amountYen =
      input.amountYen === null || input.amountYen === undefined ? null : requireYen(input.amountYen, 'amountYen', AMOUNT_MAX_YEN);
    return { orderId: input.orderId, amountYen, refundId: randomUUID(), provider: services.payments };
  },
  call: (prepared, { session, services }) => ({
    work: reserveRefund,
    input: {
      tenantId: session.tenantId,
      orderId: prepared.orderId,
      refundId: prepared.refundId,
      amountYen: prepared.amountYen,
      reconcileAfterMs: services.config.payments.reconcileAfterMs,
    },
    entities: refundEntities,
  }),
  flow: async (commit, prepared, ctx) => {
    const leave = ctx.services.paymentsWaiting.enter();
    try {
      const run = await commit();
      return { order: await settleRefund(run.value, run.replayed, ctx, prepared.provider) };
    } finally {
      leave();
    }
  },
});
