import { randomUUID } from 'node:crypto';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requirePageSize, requireYen } from '../validate.js';
import { reserveCheckout, type CheckoutResult, type SettleDeps } from '../../features/checkout/flow.js';
import { findOrder, listOrders, type Order, type OrderReader } from '../../features/checkout/orders.js';
import { reservationEntities } from '../../features/checkout/reserve.js';
import { badInput, paymentsUnavailable } from '../../core/errors.js';
import type { PaymentProvider } from '../../features/payments/provider.js';

const ORDERS_PAGE_DEFAULT = 100;
const ORDERS_PAGE_MAX = 500;
/** Stripe takes amounts of up to eight digits. */
const AMOUNT_MAX_YEN = 99_999_999;
/** A Stripe id (pm_…) or one of its test payment methods (pm_card_visa). */
const PAYMENT_METHOD = /^[A-Za-z0-9_]{1,255}$/;

const OrderStatus = builder.enumType('OrderStatus', {
  values: {
    PENDING_PAYMENT: { description: 'Waiting for the payment: its coupon is held, its outcome not known yet.' },
    PAID: { description: 'Paid: one charge of chargedYen, the coupon redeemed.' },
    CANCELED: { description: 'The payment was declined: no charge, the coupon given back.' },
  } as const,
});

export const OrderType = builder.objectRef<Order>('Order').implement({
  description: 'A purchase of a member, paid at the payment provider less one of their coupons.',
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    memberId: t.exposeID('memberId'),
    status: t.field({ type: OrderStatus, resolve: (o) => o.status }),
    amountYen: t.exposeInt('amountYen', { description: 'The price, in yen.' }),
    discountYen: t.exposeInt('discountYen', { description: "The coupon's value (0 without one); it may exceed the price." }),
    chargedYen: t.exposeInt('chargedYen', { description: 'amountYen - discountYen, never below 0: what the payment provider charges.' }),
    couponId: t.expose('couponId', { type: 'UUID', nullable: true }),
    paymentIntentId: t.exposeString('paymentIntentId', {
      nullable: true,
      description: "The payment provider's PaymentIntent (pi_…), once it answered with one.",
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CheckoutStatus = builder.enumType('CheckoutStatus', {
  values: {
    PAID: { description: 'Paid now (or before, for a resend with the same Idempotency-Key).' },
    DECLINED: { description: 'The payment provider declined the payment: the order is CANCELED and its coupon given back.' },
    PENDING: {
      description:
        'The outcome is not known yet (the provider did not answer in time, or answered that it is still working): the order stays ' +
        'PENDING_PAYMENT with its coupon held, and the server settles it; read it with `order`, or resend with the same Idempotency-Key.',
    },
    COUPON_UNAVAILABLE: {
      description: 'The coupon is held by another order, redeemed, voided or not yours. Nothing was written and nobody was charged.',
    },
  } as const,
});

const CheckoutPayload = builder.objectRef<CheckoutResult>('CheckoutPayload').implement({
  fields: (t) => ({
    status: t.field({ type: CheckoutStatus, resolve: (r) => r.status }),
    order: t.expose('order', { type: OrderType, nullable: true, description: 'Null for COUPON_UNAVAILABLE, which wrote nothing.' }),
  }),
});

const CheckoutInput = builder.inputType('CheckoutInput', {
  fields: (t) => ({
    amountYen: t.int({ description: `The price in yen: a whole number from 1 to ${AMOUNT_MAX_YEN}.` }),
    couponId: t.field({ type: 'UUID', required: false, description: 'One of your coupons to take off the price.' }),
    paymentMethod: t.string({ description: 'The payment method the frontend got from Stripe.js (pm_…).' }),
  }),
});

interface PreparedCheckout {
  orderId: string;
  amountYen: number;
  couponId: string | null;
  paymentMethod: string;
  provider: PaymentProvider;
}

function settleDeps(ctx: Context, provider: PaymentProvider): SettleDeps {
  const { services } = ctx;
  return {
    provider,
    timeoutMs: services.config.payments.timeoutMs,
    reconcileForMs: services.config.payments.reconcileForMs,
    deadline: ctx.deadline,
    inTransaction: async (work) => (await ctx.database.inTransaction({ deadline: ctx.deadline }, work)).value,
    stepOut: (wait) => ctx.turn.stepOut(wait),
    log: ctx.log,
    clock: services.clock,
  };
}

defineMutation('checkout', {
  access: { member: true },
  description:
    'Buys for amountYen less one of your coupons, paid with paymentMethod at the payment provider: PAID, DECLINED, or PENDING while ' +
    'the outcome is not known (not an error). Honours Idempotency-Key: a resend is the same order and the same charge. ' +
    'COUPON_UNAVAILABLE writes nothing and charges nobody.',
  input: CheckoutInput,
  type: CheckoutPayload,
  prepare: (input, { services }): PreparedCheckout => {
    const amountYen = requireYen(input.amountYen, 'amountYen', AMOUNT_MAX_YEN);
    if (!PAYMENT_METHOD.test(input.paymentMethod)) {
      throw badInput('paymentMethod must be a payment method id such as pm_card_visa (letters, digits and "_")', 'paymentMethod');
    }
    if (services.payments === null) throw paymentsUnavailable();
    return {
      orderId: randomUUID(),
      amountYen,
      couponId: input.couponId ?? null,
      paymentMethod: input.paymentMethod,
      provider: services.payments,
    };
  },
  unit: (prepared, { session, services }) => ({
    work: reserveCheckout,
    input: {
      tenantId: session.tenantId,
      memberId: session.userId,
      orderId: prepared.orderId,
      amountYen: prepared.amountYen,
      couponId: prepared.couponId,
      paymentMethod: prepared.paymentMethod,
      now: services.clock(),
      reconcileAfterMs: services.config.payments.reconcileAfterMs,
    },
    needs: {
      algorithm: services.algorithms.checkout,
      deps: { provider: prepared.provider, timeoutMs: services.config.payments.timeoutMs },
    },
    entities: reservationEntities,
  }),
  // Transaction 1 and 2 with the provider between them; the place in the waiting room is taken
  // before anything is written, so a checkout refused for want of one has written nothing.
  flow: async (commit, prepared, ctx) => {
    const leave = ctx.services.paymentsWaiting.enter();
    try {
      const run = await commit();
      return await ctx.services.algorithms.checkout.settle(run.value, run.replayed, settleDeps(ctx, prepared.provider));
    } finally {
      leave();
    }
  },
  answered: (answer, { services }) => services.metrics.checkoutOutcomes.inc({ status: answer.status }),
});

const readerOf = (ctx: Context & { session: { tenantId: string } }): OrderReader => ({
  tenantId: ctx.session.tenantId,
  memberId: ctx.session.role === 'user' ? ctx.session.userId : null,
});

builder.queryField('order', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: OrderType,
    nullable: true,
    description: "One order: a member's own, or any of the tenant's for its admin; null when there is none.",
    args: { id: t.arg({ type: 'UUID', required: true }) },
    resolve: (_root, { id }, ctx) => runRead(ctx, (trx) => findOrder(trx, readerOf(ctx), id)),
  }),
);

builder.queryField('orders', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: [OrderType],
    description: `Orders newest first: a member's own, every order of the tenant for its admin (\`first\`: 1 to ${ORDERS_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: ORDERS_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? ORDERS_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const limit = requirePageSize(first ?? ORDERS_PAGE_DEFAULT, 'first', ORDERS_PAGE_MAX);
      return runRead(ctx, (trx) => listOrders(trx, readerOf(ctx), limit));
    },
  }),
);
