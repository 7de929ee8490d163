import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireIdentifier, requirePageSize } from '../validate.js';
import { issueEntities, type IssueResult } from '../../features/coupons/issue.js';
import { couponStatuses, listMemberCoupons, type CouponStatus, type CouponWithStatus } from '../../features/coupons/member-coupons.js';

const COUPONS_PAGE_DEFAULT = 100;
const COUPONS_PAGE_MAX = 500;

const CouponStatusType = builder.enumType('CouponStatus', {
  values: {
    AVAILABLE: { description: 'Yours to redeem or to check out with.' },
    HELD: { description: 'Held by one PENDING_PAYMENT order until its payment is known: then redeemed for it, or given back.' },
    REDEEMED: { description: 'Redeemed: by redeemCoupon, or for a paid order.' },
    VOIDED: { description: 'Voided (a duplicate from an adopted database); it can never be used.' },
    EXPIRED: {
      description:
        'Its expiresAt has passed and it was neither redeemed nor held: it can no longer be redeemed or checked out with. ' +
        'A coupon an order held before it expired stays HELD, and pays for that order.',
    },
  } as const,
});

/**
 * Coupon.status of the coupons an answer carries without it (an idempotent replay's, whose stored
 * answer keeps no status, and another issuer's): one statement per request for all of them, read
 * after the mutation committed.
 */
const statusLoader = createContextCache(
  (ctx: Context) =>
    new DataLoader<string, CouponStatus>(async (ids) => {
      const statuses = await runRead(ctx, (trx) => couponStatuses(trx, ctx.session!.tenantId!, ids));
      // Coupons are never deleted: one the answer named and the tenant lacks is a bug, not a status.
      return ids.map((id) => statuses.get(id) ?? new Error(`coupon ${id} is not in the tenant`));
    }),
);

export const CouponType = builder.objectRef<CouponWithStatus>('Coupon').implement({
  fields: (t) => ({
    status: t.field({
      type: CouponStatusType,
      description: 'As the answer read it: with the coupon where its statement read the coupon, else just after the mutation.',
      resolve: (coupon, _args, ctx) => coupon.status ?? statusLoader(ctx).load(coupon.id),
    }),
    id: t.expose('id', { type: 'UUID' }),
    campaignId: t.exposeID('campaignId'),
    memberId: t.exposeID('memberId'),
    month: t.exposeString('month', { description: 'The business month it counts in (YYYY-MM, BUSINESS_TIME_ZONE).' }),
    amountYen: t.exposeInt('amountYen'),
    issuedAt: t.expose('issuedAt', { type: 'DateTime', description: "When it was issued, on the database's clock." }),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      nullable: true,
      description: "Its campaign's couponsExpireAt: from then on it is EXPIRED unless redeemed or held; null: never.",
    }),
  }),
});

const IssueCouponStatus = builder.enumType('IssueCouponStatus', {
  values: {
    ISSUED: { description: 'A new coupon was issued.' },
    ALREADY_ISSUED: { description: "The member already holds this campaign's coupon; it is returned." },
    NOT_STARTED: { description: "The campaign's startsAt has not come yet (on the database's clock). Nothing was written." },
    ENDED: { description: "The campaign's endsAt has passed (on the database's clock). Nothing was written." },
    MONTHLY_CAP: { description: "The coupon would take the member's month over the tenant's cap. Nothing was written." },
    BUDGET_EXCEEDED: { description: "The campaign's budget has no room for another coupon. Nothing was written." },
  } as const,
});

const IssueCouponPayload = builder.objectRef<IssueResult>('IssueCouponPayload').implement({
  fields: (t) => ({
    status: t.field({ type: IssueCouponStatus, resolve: (r) => r.status }),
    coupon: t.field({
      type: CouponType,
      nullable: true,
      // The coupon comes with the status the issue's statement read, so no second read for it (the
      // answer of a Hasura action selects every field); a replayed answer's is looked up.
      resolve: (r) => r.coupon,
    }),
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
    "within the campaign's period, the member's monthly cap and the campaign's budget. A refusal is a status, not an error.",
  input: IssueCouponInput,
  type: IssueCouponPayload,
  prepare: (input) => requireIdentifier(input.campaignId, 'campaignId'),
  call: (campaignId, { session, services, deadline, turn }) => ({
    work: services.couponIssuer.issue,
    oneStatement: services.couponIssuer.issueInOneStatement,
    isolation: services.couponIssuer.isolation,
    claimsKey: services.couponIssuer.claimsKey,
    input: { tenantId: session.tenantId, memberId: session.userId, campaignId, timeZone: services.config.coupons.businessTimeZone },
    needs: { deadline, turn },
    entities: issueEntities,
  }),
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
