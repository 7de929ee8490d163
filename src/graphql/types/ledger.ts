import { builder } from '../builder.js';
import { runRead } from '../read.js';
import {
  ledgerCheck,
  type CampaignDrift,
  type CampaignOverBudget,
  type LedgerReport,
  type MemberOverCap,
  type UsageDrift,
} from '../../features/coupons/ledger.js';

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
