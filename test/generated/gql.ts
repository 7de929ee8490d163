/* eslint-disable */
import * as types from './graphql.js';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "mutation CreateTenant($input: CreateTenantInput!) {\n  createTenant(input: $input) {\n    tenant {\n      id\n      name\n      monthlyCapYen\n      createdAt\n    }\n  }\n}\n\nmutation CreateContract($input: CreateContractInput!) {\n  createContract(input: $input) {\n    contract {\n      id\n      title\n      createdAt\n    }\n  }\n}\n\nmutation CreateContractDocument($input: CreateContractDocumentInput!) {\n  createContractDocument(input: $input) {\n    document {\n      id\n      contractId\n      docNumber\n      createdAt\n    }\n  }\n}\n\nquery Contract($id: UUID!) {\n  contract(id: $id) {\n    id\n    title\n    documents {\n      id\n      contractId\n      docNumber\n    }\n  }\n}\n\nquery Viewer {\n  viewer {\n    role\n    tenantId\n    userId\n  }\n}": typeof types.CreateTenantDocument,
    "mutation CreateCampaign($input: CreateCampaignInput!) {\n  createCampaign(input: $input) {\n    campaign {\n      id\n      name\n      discountYen\n      budgetYen\n      budgetSlots\n      issuedYen\n      remainingYen\n    }\n  }\n}\n\nmutation IssueCoupon($input: IssueCouponInput!) {\n  issueCoupon(input: $input) {\n    status\n    coupon {\n      id\n      campaignId\n      memberId\n      month\n      amountYen\n      issuedAt\n    }\n  }\n}\n\nquery Campaign($id: ID!) {\n  campaign(id: $id) {\n    id\n    name\n    discountYen\n    budgetYen\n    budgetSlots\n    issuedYen\n    remainingYen\n  }\n}\n\nquery MyCoupons {\n  myCoupons {\n    id\n    campaignId\n    memberId\n    month\n    amountYen\n    issuedAt\n  }\n}\n\nquery OutboxStats {\n  outboxStats {\n    pending\n    dead\n    oldestPendingAgeSeconds\n  }\n}\n\nquery LedgerCheck {\n  ledgerCheck {\n    ok\n    campaignDrift {\n      tenantId\n      campaignId\n      issuedYen\n      couponsYen\n    }\n    usageDrift {\n      tenantId\n      memberId\n      month\n      usedYen\n      couponsYen\n    }\n    membersOverCap {\n      tenantId\n      memberId\n      month\n      couponsYen\n      capYen\n    }\n    campaignsOverBudget {\n      tenantId\n      campaignId\n      budgetYen\n      couponsYen\n    }\n  }\n}": typeof types.CreateCampaignDocument,
};
const documents: Documents = {
    "mutation CreateTenant($input: CreateTenantInput!) {\n  createTenant(input: $input) {\n    tenant {\n      id\n      name\n      monthlyCapYen\n      createdAt\n    }\n  }\n}\n\nmutation CreateContract($input: CreateContractInput!) {\n  createContract(input: $input) {\n    contract {\n      id\n      title\n      createdAt\n    }\n  }\n}\n\nmutation CreateContractDocument($input: CreateContractDocumentInput!) {\n  createContractDocument(input: $input) {\n    document {\n      id\n      contractId\n      docNumber\n      createdAt\n    }\n  }\n}\n\nquery Contract($id: UUID!) {\n  contract(id: $id) {\n    id\n    title\n    documents {\n      id\n      contractId\n      docNumber\n    }\n  }\n}\n\nquery Viewer {\n  viewer {\n    role\n    tenantId\n    userId\n  }\n}": types.CreateTenantDocument,
    "mutation CreateCampaign($input: CreateCampaignInput!) {\n  createCampaign(input: $input) {\n    campaign {\n      id\n      name\n      discountYen\n      budgetYen\n      budgetSlots\n      issuedYen\n      remainingYen\n    }\n  }\n}\n\nmutation IssueCoupon($input: IssueCouponInput!) {\n  issueCoupon(input: $input) {\n    status\n    coupon {\n      id\n      campaignId\n      memberId\n      month\n      amountYen\n      issuedAt\n    }\n  }\n}\n\nquery Campaign($id: ID!) {\n  campaign(id: $id) {\n    id\n    name\n    discountYen\n    budgetYen\n    budgetSlots\n    issuedYen\n    remainingYen\n  }\n}\n\nquery MyCoupons {\n  myCoupons {\n    id\n    campaignId\n    memberId\n    month\n    amountYen\n    issuedAt\n  }\n}\n\nquery OutboxStats {\n  outboxStats {\n    pending\n    dead\n    oldestPendingAgeSeconds\n  }\n}\n\nquery LedgerCheck {\n  ledgerCheck {\n    ok\n    campaignDrift {\n      tenantId\n      campaignId\n      issuedYen\n      couponsYen\n    }\n    usageDrift {\n      tenantId\n      memberId\n      month\n      usedYen\n      couponsYen\n    }\n    membersOverCap {\n      tenantId\n      memberId\n      month\n      couponsYen\n      capYen\n    }\n    campaignsOverBudget {\n      tenantId\n      campaignId\n      budgetYen\n      couponsYen\n    }\n  }\n}": types.CreateCampaignDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation CreateTenant($input: CreateTenantInput!) {\n  createTenant(input: $input) {\n    tenant {\n      id\n      name\n      monthlyCapYen\n      createdAt\n    }\n  }\n}\n\nmutation CreateContract($input: CreateContractInput!) {\n  createContract(input: $input) {\n    contract {\n      id\n      title\n      createdAt\n    }\n  }\n}\n\nmutation CreateContractDocument($input: CreateContractDocumentInput!) {\n  createContractDocument(input: $input) {\n    document {\n      id\n      contractId\n      docNumber\n      createdAt\n    }\n  }\n}\n\nquery Contract($id: UUID!) {\n  contract(id: $id) {\n    id\n    title\n    documents {\n      id\n      contractId\n      docNumber\n    }\n  }\n}\n\nquery Viewer {\n  viewer {\n    role\n    tenantId\n    userId\n  }\n}"): (typeof documents)["mutation CreateTenant($input: CreateTenantInput!) {\n  createTenant(input: $input) {\n    tenant {\n      id\n      name\n      monthlyCapYen\n      createdAt\n    }\n  }\n}\n\nmutation CreateContract($input: CreateContractInput!) {\n  createContract(input: $input) {\n    contract {\n      id\n      title\n      createdAt\n    }\n  }\n}\n\nmutation CreateContractDocument($input: CreateContractDocumentInput!) {\n  createContractDocument(input: $input) {\n    document {\n      id\n      contractId\n      docNumber\n      createdAt\n    }\n  }\n}\n\nquery Contract($id: UUID!) {\n  contract(id: $id) {\n    id\n    title\n    documents {\n      id\n      contractId\n      docNumber\n    }\n  }\n}\n\nquery Viewer {\n  viewer {\n    role\n    tenantId\n    userId\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation CreateCampaign($input: CreateCampaignInput!) {\n  createCampaign(input: $input) {\n    campaign {\n      id\n      name\n      discountYen\n      budgetYen\n      budgetSlots\n      issuedYen\n      remainingYen\n    }\n  }\n}\n\nmutation IssueCoupon($input: IssueCouponInput!) {\n  issueCoupon(input: $input) {\n    status\n    coupon {\n      id\n      campaignId\n      memberId\n      month\n      amountYen\n      issuedAt\n    }\n  }\n}\n\nquery Campaign($id: ID!) {\n  campaign(id: $id) {\n    id\n    name\n    discountYen\n    budgetYen\n    budgetSlots\n    issuedYen\n    remainingYen\n  }\n}\n\nquery MyCoupons {\n  myCoupons {\n    id\n    campaignId\n    memberId\n    month\n    amountYen\n    issuedAt\n  }\n}\n\nquery OutboxStats {\n  outboxStats {\n    pending\n    dead\n    oldestPendingAgeSeconds\n  }\n}\n\nquery LedgerCheck {\n  ledgerCheck {\n    ok\n    campaignDrift {\n      tenantId\n      campaignId\n      issuedYen\n      couponsYen\n    }\n    usageDrift {\n      tenantId\n      memberId\n      month\n      usedYen\n      couponsYen\n    }\n    membersOverCap {\n      tenantId\n      memberId\n      month\n      couponsYen\n      capYen\n    }\n    campaignsOverBudget {\n      tenantId\n      campaignId\n      budgetYen\n      couponsYen\n    }\n  }\n}"): (typeof documents)["mutation CreateCampaign($input: CreateCampaignInput!) {\n  createCampaign(input: $input) {\n    campaign {\n      id\n      name\n      discountYen\n      budgetYen\n      budgetSlots\n      issuedYen\n      remainingYen\n    }\n  }\n}\n\nmutation IssueCoupon($input: IssueCouponInput!) {\n  issueCoupon(input: $input) {\n    status\n    coupon {\n      id\n      campaignId\n      memberId\n      month\n      amountYen\n      issuedAt\n    }\n  }\n}\n\nquery Campaign($id: ID!) {\n  campaign(id: $id) {\n    id\n    name\n    discountYen\n    budgetYen\n    budgetSlots\n    issuedYen\n    remainingYen\n  }\n}\n\nquery MyCoupons {\n  myCoupons {\n    id\n    campaignId\n    memberId\n    month\n    amountYen\n    issuedAt\n  }\n}\n\nquery OutboxStats {\n  outboxStats {\n    pending\n    dead\n    oldestPendingAgeSeconds\n  }\n}\n\nquery LedgerCheck {\n  ledgerCheck {\n    ok\n    campaignDrift {\n      tenantId\n      campaignId\n      issuedYen\n      couponsYen\n    }\n    usageDrift {\n      tenantId\n      memberId\n      month\n      usedYen\n      couponsYen\n    }\n    membersOverCap {\n      tenantId\n      memberId\n      month\n      couponsYen\n      capYen\n    }\n    campaignsOverBudget {\n      tenantId\n      campaignId\n      budgetYen\n      couponsYen\n    }\n  }\n}"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;