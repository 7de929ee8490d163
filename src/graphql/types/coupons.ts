import { builder } from '../builder.js';
import {
  ledgerCheck,
  type CampaignDrift,
  type CampaignOverBudget,
  type LedgerReport,
  type MemberOverCap,
  type UsageDrift,
} from '../../coupons/ledger.js';
import { badInput } from '../../errors.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireIdentifier, requirePageSize, requireText, requireYen } from '../validate.js';
import {
  findCampaign,
  insertCampaign,
  listCampaigns,
  MAX_BUDGET_LEASE_COUPONS,
  MAX_BUDGET_SLOTS,
  type Campaign,
} from '../../coupons/campaigns.js';
import type { Coupon, IssueResult } from '../../coupons/issue.js';
import { listMemberCoupons } from '../../coupons/member-coupons.js';

const LIST_PAGE_DEFAULT = 100;
const LIST_PAGE_MAX = 500;

export const CampaignType = builder.objectRef<Campaign>('Campaign').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    discountYen: t.exposeInt('discountYen', { description: 'The value of each coupon, in yen.' }),
    budgetYen: t.exposeInt('budgetYen'),
    budgetSlots: t.exposeInt('budgetSlots', { description: 'How many rows the budget is split over.' }),
    budgetLeaseCoupons: t.exposeInt('budgetLeaseCoupons', {
      description: 'Coupons a server process leases from the budget at a time; 0: every issue takes from the budget rows.',
    }),
    issuedYen: t.exposeInt('issuedYen', { description: 'Yen issued so far: the sum of the budget slots and of the leases.' }),
    remainingYen: t.int({ resolve: (c) => Math.max(0, c.budgetYen - c.issuedYen) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

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

const CreateCampaignInput = builder.inputType('CreateCampaignInput', {
  fields: (t) => ({
    id: t.id({ description: '1 to 64 letters, digits, "_" or "-", unique in the tenant.' }),
    name: t.string(),
    discountYen: t.int({ description: 'The value of each coupon: a positive whole number of yen.' }),
    budgetYen: t.int({ description: 'The most the campaign may issue in all, in yen.' }),
    budgetSlots: t.int({
      required: false,
      defaultValue: 1,
      description: `Rows the budget is split over (1 to ${MAX_BUDGET_SLOTS}); more rows let a hot campaign issue in parallel.`,
    }),
    budgetLeaseCoupons: t.int({
      required: false,
      defaultValue: 0,
      description:
        `Budget leases (0 to ${MAX_BUDGET_LEASE_COUPONS} coupons, with budgetSlots 1): each server process leases this many coupons' ` +
        'worth of the budget at a time and issues from its lease first; 0 (the default) takes every issue from the budget rows.',
    }),
  }),
});

const CreateCampaignPayload = builder.objectRef<{ campaign: Campaign }>('CreateCampaignPayload').implement({
  fields: (t) => ({ campaign: t.expose('campaign', { type: CampaignType }) }),
});

const IssueCouponInput = builder.inputType('IssueCouponInput', {
  fields: (t) => ({ campaignId: t.id() }),
});

defineMutation('createCampaign', {
  access: { tenantAdmin: true },
  description: "Creates a coupon campaign in the session's tenant. Tenant admin only.",
  input: CreateCampaignInput,
  type: CreateCampaignPayload,
  prepare: (input) => {
    const budgetSlots = input.budgetSlots ?? 1;
    if (!Number.isInteger(budgetSlots) || budgetSlots < 1 || budgetSlots > MAX_BUDGET_SLOTS) {
      throw badInput(`budgetSlots must be from 1 to ${MAX_BUDGET_SLOTS}`, 'budgetSlots');
    }
    const budgetLeaseCoupons = input.budgetLeaseCoupons ?? 0;
    if (!Number.isInteger(budgetLeaseCoupons) || budgetLeaseCoupons < 0 || budgetLeaseCoupons > MAX_BUDGET_LEASE_COUPONS) {
      throw badInput(`budgetLeaseCoupons must be from 0 to ${MAX_BUDGET_LEASE_COUPONS}`, 'budgetLeaseCoupons');
    }
    if (budgetLeaseCoupons > 0 && budgetSlots !== 1)
      throw badInput('budgetLeaseCoupons needs budgetSlots 1: leases replace slots', 'budgetLeaseCoupons');
    const values = {
      id: requireIdentifier(input.id, 'id'),
      name: requireText(input.name, 'name', 200),
      discountYen: requireYen(input.discountYen, 'discountYen'),
      budgetYen: requireYen(input.budgetYen, 'budgetYen'),
      budgetSlots,
      budgetLeaseCoupons,
    };
    if (values.discountYen > values.budgetYen) throw badInput('discountYen must not exceed budgetYen', 'discountYen');
    return values;
  },
  unit: (values, { session }) => ({
    work: async (trx) => ({ campaign: await insertCampaign(trx, session.tenantId, values) }),
    entities: ({ campaign }) => [campaign.id],
  }),
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
  unit: (campaignId, { session, services }) => {
    const issuer = services.algorithms.couponIssuer;
    const request = {
      tenantId: session.tenantId,
      memberId: session.userId,
      campaignId,
      now: services.clock(),
      timeZone: services.config.businessTimeZone,
    };
    const { oneStatement } = issuer;
    return {
      ...(issuer.isolation ? { isolation: issuer.isolation } : {}),
      ...(issuer.claimsKey ? { claimsKey: true } : {}),
      ...(oneStatement
        ? {
            oneStatement: (db, bookkeeping) =>
              oneStatement(db, request, bookkeeping, { timeouts: services.transactions, leases: services.budgetLeases }),
          }
        : {}),
      work: (trx, bookkeeping) => issuer.issue(trx, request, bookkeeping),
      entities: ({ coupon }) => (coupon ? [coupon.id, coupon.campaignId] : [campaignId]),
    };
  },
  answered: (result, { services }) => services.metrics.couponOutcomes.inc({ status: result.status }),
});

builder.queryField('campaign', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: CampaignType,
    nullable: true,
    description: "A campaign of the session's tenant, or null.",
    args: { id: t.arg.id() },
    resolve: (_root, { id }, ctx) => runRead(ctx, (trx) => findCampaign(trx, ctx.session.tenantId, id)),
  }),
);

builder.queryField('campaigns', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: [CampaignType],
    description: `The session's tenant's campaigns, newest first (\`first\`: 1 to ${LIST_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: LIST_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? LIST_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const limit = requirePageSize(first ?? LIST_PAGE_DEFAULT, 'first', LIST_PAGE_MAX);
      return runRead(ctx, (trx) => listCampaigns(trx, ctx.session.tenantId, limit));
    },
  }),
);

builder.queryField('myCoupons', (t) =>
  t.withAuth({ member: true }).field({
    type: [CouponType],
    description: `The session's member's coupons, newest first (\`first\`: 1 to ${LIST_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: LIST_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? LIST_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const { tenantId, userId } = ctx.session;
      const limit = requirePageSize(first ?? LIST_PAGE_DEFAULT, 'first', LIST_PAGE_MAX);
      return runRead(ctx, (trx) => listMemberCoupons(trx, tenantId, userId, limit));
    },
  }),
);

const CampaignDriftType = builder.objectRef<CampaignDrift>('CampaignDrift').implement({
  fields: (t) => ({
    tenantId: t.exposeID('tenantId'),
    campaignId: t.exposeID('campaignId'),
    issuedYen: t.exposeInt('issuedYen', { description: "The campaign's counter (sum of its budget slots)." }),
    couponsYen: t.exposeInt('couponsYen', { description: 'The sum of its coupons.' }),
  }),
});

const UsageDriftType = builder.objectRef<UsageDrift>('UsageDrift').implement({
  fields: (t) => ({
    tenantId: t.exposeID('tenantId'),
    memberId: t.exposeID('memberId'),
    month: t.exposeString('month'),
    usedYen: t.exposeInt('usedYen', { description: 'The member-month counter.' }),
    couponsYen: t.exposeInt('couponsYen', { description: "The sum of the member's coupons in the month." }),
  }),
});

const MemberOverCapType = builder.objectRef<MemberOverCap>('MemberOverCap').implement({
  fields: (t) => ({
    tenantId: t.exposeID('tenantId'),
    memberId: t.exposeID('memberId'),
    month: t.exposeString('month'),
    couponsYen: t.exposeInt('couponsYen'),
    capYen: t.exposeInt('capYen'),
  }),
});

const CampaignOverBudgetType = builder.objectRef<CampaignOverBudget>('CampaignOverBudget').implement({
  fields: (t) => ({
    tenantId: t.exposeID('tenantId'),
    campaignId: t.exposeID('campaignId'),
    budgetYen: t.exposeInt('budgetYen'),
    couponsYen: t.exposeInt('couponsYen'),
  }),
});

const LedgerReportType = builder.objectRef<LedgerReport>('LedgerReport').implement({
  description: 'Counters compared with the facts they summarise.',
  fields: (t) => ({
    ok: t.exposeBoolean('ok', { description: 'True when every counter equals its facts and no limit is exceeded.' }),
    campaignDrift: t.expose('campaignDrift', { type: [CampaignDriftType] }),
    usageDrift: t.expose('usageDrift', { type: [UsageDriftType] }),
    membersOverCap: t.expose('membersOverCap', { type: [MemberOverCapType] }),
    campaignsOverBudget: t.expose('campaignsOverBudget', { type: [CampaignOverBudgetType] }),
    legacyOverspend: t.expose('legacyOverspend', {
      type: [CampaignOverBudgetType],
      description: 'Campaigns over budget by no more than they already were when adopted: legacy, not drift.',
    }),
    legacyMembersOverCap: t.expose('legacyMembersOverCap', {
      type: [MemberOverCapType],
      description: 'Member-months over the cap with adopted coupons only: legacy, not drift.',
    }),
  }),
});

builder.queryField('ledgerCheck', (t) =>
  t.withAuth({ tenantAdmin: true, operator: true }).field({
    type: LedgerReportType,
    description: "Reconciliation of the tenant's coupon counters (every tenant for the platform operator). Admins only.",
    resolve: (_root, _args, ctx) => runRead(ctx, (trx) => ledgerCheck(trx, ctx.session.tenantId)),
  }),
);
