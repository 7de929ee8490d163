import { builder } from '../builder.js';
import { defineMutation } from '../define-mutation.js';
import { redeemEntities, type RedeemResult } from '../../features/coupons/redeem.js';
import { CouponType } from './coupons.js';

const RedeemCouponStatus = builder.enumType('RedeemCouponStatus', {
  values: {
    REDEEMED: { description: 'The coupon is redeemed now, by this request.' },
    ALREADY_REDEEMED: { description: 'The coupon was redeemed before; redeemedAt says when. Nothing changed.' },
    VOIDED: { description: 'The coupon was voided and cannot be redeemed. Nothing was written.' },
    HELD: {
      description:
        "A checkout's order holds the coupon while its payment is not known: it is redeemed for that order or given back. Nothing was written.",
    },
    EXPIRED: {
      description: "The coupon's expiresAt has passed (on the database's clock): it can no longer be redeemed. Nothing was written.",
    },
  } as const,
});

const RedeemCouponPayload = builder.objectRef<RedeemResult>('RedeemCouponPayload').implement({
  fields: (t) => ({
    status: t.field({ type: RedeemCouponStatus, resolve: (r) => r.status }),
    coupon: t.expose('coupon', { type: CouponType }),
    redeemedAt: t.expose('redeemedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the coupon was redeemed (this time or the first time); null when it is voided, held or expired.',
    }),
  }),
});

const RedeemCouponInput = builder.inputType('RedeemCouponInput', {
  fields: (t) => ({ couponId: t.field({ type: 'UUID' }) }),
});

defineMutation('redeemCoupon', {
  access: { member: true },
  description:
    "Redeems one of the session's member's coupons, once: REDEEMED the first time, ALREADY_REDEEMED after. " +
    'A voided coupon is refused (VOIDED), and so are one a checkout holds (HELD) and one past its expiresAt (EXPIRED); ' +
    "another member's coupon is NOT_FOUND.",
  input: RedeemCouponInput,
  type: RedeemCouponPayload,
  call: ({ couponId }, { session, services }) => ({
    work: services.couponRedeemer.redeem,
    input: { tenantId: session.tenantId, memberId: session.userId, couponId, now: services.clock() },
    entities: redeemEntities,
  }),
});
