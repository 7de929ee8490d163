import { builder } from '../builder.js';
import { badInput } from '../../core/errors.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireIdentifier, requirePageSize, requireText, requireYen } from '../validate.js';
import { budgetChangeEntities, type BudgetChangeResult } from '../../features/coupons/budget-change.js';
import {
  findCampaign,
  campaignEntities,
  createCampaign,
  listCampaigns,
  MAX_BUDGET_LEASE_COUPONS,
  MAX_BUDGET_SLOTS,
  type Campaign,
} from '../../features/coupons/campaigns.js';

const CAMPAIGNS_PAGE_DEFAULT = 100;
const CAMPAIGNS_PAGE_MAX = 500;

const CampaignType = builder.objectRef<Campaign>('Campaign').implement({
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
    startsAt: t.expose('startsAt', {
      type: 'DateTime',
      description: "Issues are answered from then on; before it issueCoupon is NOT_STARTED. The database's clock decides.",
    }),
    endsAt: t.expose('endsAt', {
      type: 'DateTime',
      nullable: true,
      description: 'From then on issueCoupon is ENDED; null: the campaign has no end.',
    }),
    couponsExpireAt: t.expose('couponsExpireAt', {
      type: 'DateTime',
      nullable: true,
      description: "Its coupons' expiresAt: from then on a coupon neither redeemed nor held is EXPIRED; null: they never expire.",
    }),
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
      description:
        `Rows the budget is split over (1 to ${MAX_BUDGET_SLOTS}, at most budgetYen / discountYen), by whole coupons; ` +
        'more rows let a hot campaign issue in parallel.',
    }),
    budgetLeaseCoupons: t.int({
      required: false,
      defaultValue: 0,
      description:
        `Budget leases (0 to ${MAX_BUDGET_LEASE_COUPONS} coupons, with budgetSlots 1): each server process leases this many coupons' ` +
        'worth of the budget at a time and issues from its lease first; 0 (the default) takes every issue from the budget rows.',
    }),
    startsAt: t.field({
      type: 'DateTime',
      required: false,
      description: 'When issues open. Absent: at creation.',
    }),
    endsAt: t.field({ type: 'DateTime', required: false, description: 'When issues end, after startsAt. Absent: no end.' }),
    couponsExpireAt: t.field({
      type: 'DateTime',
      required: false,
      description: 'When its coupons expire, not before startsAt. Absent: never.',
    }),
  }),
});

const CreateCampaignPayload = builder.objectRef<{ campaign: Campaign }>('CreateCampaignPayload').implement({
  fields: (t) => ({ campaign: t.expose('campaign', { type: CampaignType }) }),
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
      startsAt: input.startsAt ?? null,
      endsAt: input.endsAt ?? null,
      couponsExpireAt: input.couponsExpireAt ?? null,
    };
    if (values.discountYen > values.budgetYen) throw badInput('discountYen must not exceed budgetYen', 'discountYen');
    return values;
  },
  call: (values, { session, services }) => ({
    work: createCampaign,
    input: { tenantId: session.tenantId, campaign: values },
    needs: services.budgetSplit,
    entities: campaignEntities,
  }),
});

const ChangeCampaignBudgetStatus = builder.enumType('ChangeCampaignBudgetStatus', {
  values: {
    CHANGED: { description: 'The budget is the new figure now, for every server process; campaign shows it.' },
    BELOW_ISSUED: {
      description: 'The new figure is below what members hold (issuedYen): nothing changed, and campaign shows it as it stands.',
    },
  } as const,
});

const ChangeCampaignBudgetInput = builder.inputType('ChangeCampaignBudgetInput', {
  fields: (t) => ({
    campaignId: t.id(),
    budgetYen: t.int({ description: "The campaign's new budget in yen, raised or lowered; not below what members hold (issuedYen)." }),
  }),
});

const ChangeCampaignBudgetPayload = builder.objectRef<BudgetChangeResult>('ChangeCampaignBudgetPayload').implement({
  fields: (t) => ({
    status: t.field({ type: ChangeCampaignBudgetStatus, resolve: (r) => r.status }),
    campaign: t.expose('campaign', { type: CampaignType }),
  }),
});

defineMutation('changeCampaignBudget', {
  access: { tenantAdmin: true },
  description:
    "Sets a campaign's budget, raised or lowered, while its members issue: in force at once for every server process, " +
    'with budget slots and leases alike; leased room not yet issued is taken back. Below what members hold it is BELOW_ISSUED ' +
    'and nothing changes. Tenant admin only.',
  input: ChangeCampaignBudgetInput,
  type: ChangeCampaignBudgetPayload,
  prepare: (input) => ({
    campaignId: requireIdentifier(input.campaignId, 'campaignId'),
    budgetYen: requireYen(input.budgetYen, 'budgetYen'),
  }),
  call: (values, { session, services }) => ({
    work: services.budgetChanger.change,
    input: { tenantId: session.tenantId, ...values },
    entities: budgetChangeEntities,
  }),
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
    description: `The session's tenant's campaigns, newest first (\`first\`: 1 to ${CAMPAIGNS_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: CAMPAIGNS_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? CAMPAIGNS_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const limit = requirePageSize(first ?? CAMPAIGNS_PAGE_DEFAULT, 'first', CAMPAIGNS_PAGE_MAX);
      return runRead(ctx, (trx) => listCampaigns(trx, ctx.session.tenantId, limit));
    },
  }),
);
