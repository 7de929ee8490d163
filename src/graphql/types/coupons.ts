import { builder } from '../builder.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireIdentifier, requirePageSize } from '../validate.js';
import type { Coupon, IssueResult } from '../../coupons/issue.js';
import { listMemberCoupons } from '../../coupons/member-coupons.js';

const COUPONS_PAGE_DEFAULT = 100;
const COUPONS_PAGE_MAX = 500;

export const CouponType = builder.objectRef<Coupon>('Coupon').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    campaignId: t.exposeID('campaignId'),
    memberId: t.exposeID('memberId'),
    month: t.exposeString('month', { description: 'The business month it counts in (YYYY-MM, BUSINESS_TIME_ZONE).' }),
    amountYen: t.exposeInt('amountYen'),
    issuedAt: t.expose('issuedAt', { type: 'DateTime' }),
  }),
});

const IssueCouponStatus = builder.enumType('IssueCouponStatus', {
  values: {
    ISSUED: { description: 'A new coupon was issued.' },
    ALREADY_ISSUED: { description: "The member already holds this campaign's coupon; it is returned." },
    MONTHLY_CAP: { description: "The coupon would take the member's month over the tenant's cap. Nothing was written." },
    BUDGET_EXCEEDED: { description: "The campaign's budget has no room for another coupon. Nothing was written." },
  } as const,
});

const IssueCouponPayload = builder.objectRef<IssueResult>('IssueCouponPayload').implement({
  fields: (t) => ({
    status: t.field({ type: IssueCouponStatus, resolve: (r) => r.status }),
    coupon: t.expose('coupon', { type: CouponType, nullable: true }),
  }),
});

const IssueCouponInput = builder.inputType('IssueCouponInput', {
  fields: (t) => ({ campaignId: t.id() }),
});

/**
 * issueCoupon for the session's member: what the resolver runs, and what the benchmark runs
 * straight through pg to measure the endpoint against.
 */
export const issueCouponForSession = defineMutation('issueCoupon', {
  access: { member: true },
  description:
    "Issues the campaign's coupon to the session's member (x-hasura-user-id), at most once per campaign, " +
    "within the member's monthly cap and the campaign's budget. A refusal is a status, not an error.",
  input: IssueCouponInput,
  type: IssueCouponPayload,
  prepare: (input) => requireIdentifier(input.campaignId, 'campaignId'),
  unit: (campaignId, { session, services, deadline }) => {
    const issuer = services.algorithms.couponIssuer;
    const request = {
      tenantId: session.tenantId,
      memberId: session.userId,
      campaignId,
      now: services.clock(),
      timeZone: services.config.coupons.businessTimeZone,
    };
    const context = {
      timeouts: services.transactions,
      leases: services.budgetLeases,
      shapes: services.campaignShapes,
      deadline,
      onRace: () => services.metrics.transactionRetries.inc({ sqlstate: '40001' }),
    };
    const { oneStatement } = issuer;
    return {
      ...(issuer.isolation ? { isolation: issuer.isolation } : {}),
      ...(issuer.claimsKey ? { claimsKey: true } : {}),
      ...(oneStatement ? { oneStatement: (db, bookkeeping) => oneStatement(db, request, bookkeeping, context) } : {}),
      work: (trx, bookkeeping) => issuer.issue(trx, request, bookkeeping, context),
      entities: ({ coupon }) => (coupon ? [coupon.id, coupon.campaignId] : [campaignId]),
    };
  },
  answered: (result, { services }) => services.metrics.couponOutcomes.inc({ status: result.status }),
});

builder.queryField('myCoupons', (t) =>
  t.withAuth({ member: true }).field({
    type: [CouponType],
    description: `The session's member's coupons, newest first (\`first\`: 1 to ${COUPONS_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: COUPONS_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? COUPONS_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const { tenantId, userId } = ctx.session;
      const limit = requirePageSize(first ?? COUPONS_PAGE_DEFAULT, 'first', COUPONS_PAGE_MAX);
      return runRead(ctx, (trx) => listMemberCoupons(trx, tenantId, userId, limit));
    },
  }),
);
