import { randomUUID } from 'node:crypto';
import { builder } from '../builder.js';
import { defineMutation } from '../define-mutation.js';
import { requireYen } from '../validate.js';
import { OrderType, paymentNeeds } from './orders.js';
import { paymentsUnavailable } from '../../core/errors.js';
import type { Order } from '../../features/checkout/orders.js';
import { refundEntities, reserveRefund } from '../../features/checkout/refunds.js';

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
    return { orderId: input.orderId, amountYen, refundId: randomUUID() };
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
  flow: (_prepared, ctx) => ({ run: ctx.services.checkout.refund, needs: paymentNeeds(ctx) }),
});
