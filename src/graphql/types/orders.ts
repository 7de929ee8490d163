import { randomUUID } from 'node:crypto';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requirePageSize, requireYen } from '../validate.js';
import type { PaymentNeeds } from '../../features/checkout/checkout.js';
import type { CheckoutResult } from '../../features/checkout/flow.js';
import { findOrder, listOrders, paidYenOf, type Order, type OrderReader } from '../../features/checkout/orders.js';
import { findOwnPayment, paymentEntities } from '../../features/checkout/pending.js';
import { reservationEntities } from '../../features/checkout/reserve.js';
import { badInput, paymentsUnavailable } from '../../core/errors.js';

const ORDERS_PAGE_DEFAULT = 100;
const ORDERS_PAGE_MAX = 500;
/** Stripe takes amounts of up to eight digits. */
const AMOUNT_MAX_YEN = 99_999_999;
/** A Stripe id (pm_…) or one of its test payment methods (pm_card_visa). */
const PAYMENT_METHOD = /^[A-Za-z0-9_]{1,255}$/;

const OrderStatus = builder.enumType('OrderStatus', {
  values: {
    PENDING_PAYMENT: {
      description:
        'Waiting for the payment (or for its customer to finish an authentication): its coupon is held, its outcome not known yet.',
    },
    PAID: { description: 'Paid: one charge of dueYen, the coupon redeemed. A partial refund leaves it PAID (see refundedYen).' },
    CANCELED: { description: 'The payment was declined, failed or given up: nothing was charged (paidYen 0), the coupon given back.' },
    REFUNDED: { description: 'Paid, then refunded whole (refundedYen equals paidYen): the coupon given back.' },
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
    dueYen: t.exposeInt('chargedYen', {
      description: 'What the payment provider is asked for: amountYen - discountYen, never below 0. Asked, not paid: see paidYen.',
    }),
    paidYen: t.int({
      description:
        'What was paid: dueYen once the order is PAID (or REFUNDED; refunds are refundedYen), 0 while pending and when canceled.',
      resolve: paidYenOf,
    }),
    chargedYen: t.exposeInt('chargedYen', {
      description: 'amountYen - discountYen: what the provider is asked for, also on an order that was never charged.',
      deprecationReason: 'Read dueYen (what is asked) or paidYen (what was paid): a canceled order was never charged.',
    }),
    refundedYen: t.exposeInt('refundedYen', {
      description: "What the payment provider refunded of the charge: refundOrder's refunds and those made in Stripe's dashboard.",
    }),
    failureCode: t.exposeString('failureCode', {
      nullable: true,
      description: "Why a CANCELED order's payment failed: Stripe's decline_code or code (card_declined, insufficient_funds, …).",
    }),
    couponId: t.expose('couponId', { type: 'UUID', nullable: true }),
    paymentIntentId: t.exposeString('paymentIntentId', {
      nullable: true,
      description: "The payment provider's PaymentIntent (pi_…) of a settled order.",
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
    REQUIRES_ACTION: {
      description:
        'The card asks for authentication (3-D Secure): finish it in the browser with Stripe.js, stripe.handleNextAction({ clientSecret }), ' +
        'then call confirmCheckout. The order stays PENDING_PAYMENT with its coupon held; an authentication not finished within ' +
        'PAYMENTS_ACTION_TIMEOUT_MS is given up (the order CANCELED, the coupon given back).',
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
    clientSecret: t.exposeString('clientSecret', {
      nullable: true,
      description: "The PaymentIntent's client secret, only with REQUIRES_ACTION (and only to the order's member): Stripe.js needs it.",
    }),
  }),
});

const CheckoutInput = builder.inputType('CheckoutInput', {
  fields: (t) => ({
    amountYen: t.int({ description: `The price in yen: a whole number from 1 to ${AMOUNT_MAX_YEN}.` }),
    couponId: t.field({ type: 'UUID', required: false, description: 'One of your coupons to take off the price.' }),
    paymentMethod: t.string({ description: 'The payment method the frontend got from Stripe.js (pm_…).' }),
  }),
});

/** What a payment is handed of its request: its deadline, its admission turn, its runner and its log. */
export const paymentNeeds = (ctx: Context): PaymentNeeds => ({
  deadline: ctx.deadline,
  turn: ctx.turn,
  database: ctx.database,
  log: ctx.log,
});

defineMutation('checkout', {
  access: { member: true },
  description:
    'Buys for amountYen less one of your coupons, paid with paymentMethod at the payment provider: PAID, DECLINED, REQUIRES_ACTION ' +
    '(finish the authentication with clientSecret, then confirmCheckout), or PENDING while the outcome is not known (not an error). ' +
    'Honours Idempotency-Key: a resend is the same order and the same charge. COUPON_UNAVAILABLE writes nothing and charges nobody.',
  input: CheckoutInput,
  type: CheckoutPayload,
  prepare: (input, { services }) => {
    const amountYen = requireYen(input.amountYen, 'amountYen', AMOUNT_MAX_YEN);
    if (!PAYMENT_METHOD.test(input.paymentMethod)) {
      throw badInput('paymentMethod must be a payment method id such as pm_card_visa (letters, digits and "_")', 'paymentMethod');
    }
    if (services.payments === null) throw paymentsUnavailable();
    return { orderId: randomUUID(), amountYen, couponId: input.couponId ?? null, paymentMethod: input.paymentMethod };
  },
  call: (prepared, { session, services }) => ({
    work: services.checkout.reserve,
    input: services.checkout.requestOf({ tenantId: session.tenantId, memberId: session.userId, ...prepared }),
    entities: reservationEntities,
  }),
  flow: (_prepared, ctx) => ({ run: ctx.services.checkout.pay, needs: paymentNeeds(ctx) }),
  answered: (answer, { services }) => services.metrics.checkoutOutcomes.inc({ status: answer.status }),
});

const ConfirmCheckoutInput = builder.inputType('ConfirmCheckoutInput', {
  fields: (t) => ({
    orderId: t.field({ type: 'UUID', description: 'The order checkout answered REQUIRES_ACTION (or PENDING) for.' }),
  }),
});

defineMutation('confirmCheckout', {
  access: { member: true },
  description:
    "After the customer's browser finished (or failed) an authentication: asks the payment provider how the order's payment stands " +
    'and settles it: PAID, DECLINED, still REQUIRES_ACTION, or PENDING. Your own orders only (another is NOT_FOUND); a settled order ' +
    'is answered as it stands. Honours Idempotency-Key.',
  input: ConfirmCheckoutInput,
  type: CheckoutPayload,
  prepare: ({ orderId }, { services }) => {
    if (services.payments === null) throw paymentsUnavailable();
    return { orderId };
  },
  call: ({ orderId }, { session, services }) => ({
    work: findOwnPayment,
    input: { tenantId: session.tenantId, memberId: session.userId, orderId, reconcileForMs: services.config.payments.reconcileForMs },
    entities: paymentEntities,
  }),
  // The payment is read in the unit's transaction; the provider is asked after it, with nothing held.
  flow: ({ orderId }, ctx) => ({
    run: ctx.services.checkout.confirm,
    needs: { ...paymentNeeds(ctx), order: { tenantId: ctx.session.tenantId, memberId: ctx.session.userId, orderId } },
  }),
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
