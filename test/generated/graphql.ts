/* eslint-disable */
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type Maybe<T> = T | null;
export type InputMaybe<T> = Maybe<T>;
export type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
export type MakeOptional<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]?: Maybe<T[SubKey]> };
export type MakeMaybe<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]: Maybe<T[SubKey]> };
export type MakeEmpty<T extends { [key: string]: unknown }, K extends keyof T> = { [_ in K]?: never };
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
/** All built-in and custom scalars, mapped to their actual values */
export type Scalars = {
  ID: { input: string; output: string; }
  String: { input: string; output: string; }
  Boolean: { input: boolean; output: boolean; }
  Int: { input: number; output: number; }
  Float: { input: number; output: number; }
  /** An instant as an ISO-8601 string in UTC, e.g. 2026-10-01T03:00:00.000Z. */
  DateTime: { input: string; output: string; }
  /** A UUID in its canonical 36-character form. */
  UUID: { input: string; output: string; }
};

/** One committed mutation: who did what, to which entities, in which request. */
export type AuditEntry = {
  __typename?: 'AuditEntry';
  actorUserId?: Maybe<Scalars['String']['output']>;
  createdAt: Scalars['DateTime']['output'];
  entityIds: Array<Scalars['String']['output']>;
  /** Increasing; pass the last one as `after` for the next page. */
  id: Scalars['ID']['output'];
  operation: Scalars['String']['output'];
  requestId: Scalars['String']['output'];
  role: Scalars['String']['output'];
  /** Empty for platform-level operations. */
  tenantId: Scalars['String']['output'];
};

export type Campaign = {
  __typename?: 'Campaign';
  /** Coupons a server process leases from the budget at a time; 0: every issue takes from the budget rows. */
  budgetLeaseCoupons: Scalars['Int']['output'];
  /** How many rows the budget is split over. */
  budgetSlots: Scalars['Int']['output'];
  budgetYen: Scalars['Int']['output'];
  /** Its coupons' expiresAt: from then on a coupon neither redeemed nor held is EXPIRED; null: they never expire. */
  couponsExpireAt?: Maybe<Scalars['DateTime']['output']>;
  createdAt: Scalars['DateTime']['output'];
  /** The value of each coupon, in yen. */
  discountYen: Scalars['Int']['output'];
  /** From then on issueCoupon is ENDED; null: the campaign has no end. */
  endsAt?: Maybe<Scalars['DateTime']['output']>;
  id: Scalars['ID']['output'];
  /** Yen issued so far: the sum of the budget slots and of the leases. */
  issuedYen: Scalars['Int']['output'];
  name: Scalars['String']['output'];
  remainingYen: Scalars['Int']['output'];
  /** Issues are answered from then on; before it issueCoupon is NOT_STARTED. The database's clock decides. */
  startsAt: Scalars['DateTime']['output'];
};

export type CampaignDrift = {
  __typename?: 'CampaignDrift';
  campaignId: Scalars['ID']['output'];
  /** The sum of its coupons. */
  couponsYen: Scalars['Int']['output'];
  /** The campaign's counter (sum of its budget slots). */
  issuedYen: Scalars['Int']['output'];
  tenantId: Scalars['ID']['output'];
};

export type CampaignOverBudget = {
  __typename?: 'CampaignOverBudget';
  budgetYen: Scalars['Int']['output'];
  campaignId: Scalars['ID']['output'];
  couponsYen: Scalars['Int']['output'];
  tenantId: Scalars['ID']['output'];
};

export type ChangeCampaignBudgetInput = {
  /** The campaign's new budget in yen, raised or lowered; not below what members hold (issuedYen). */
  budgetYen: Scalars['Int']['input'];
  campaignId: Scalars['ID']['input'];
};

export type ChangeCampaignBudgetPayload = {
  __typename?: 'ChangeCampaignBudgetPayload';
  campaign: Campaign;
  status: ChangeCampaignBudgetStatus;
};

export type ChangeCampaignBudgetStatus =
  /** The new figure is below what members hold (issuedYen): nothing changed, and campaign shows it as it stands. */
  | 'BELOW_ISSUED'
  /** The budget is the new figure now, for every server process; campaign shows it. */
  | 'CHANGED';

export type CheckoutInput = {
  /** The price in yen: a whole number from 1 to 99999999. */
  amountYen: Scalars['Int']['input'];
  /** One of your coupons to take off the price. */
  couponId?: InputMaybe<Scalars['UUID']['input']>;
  /** The payment method the frontend got from Stripe.js (pm_…). */
  paymentMethod: Scalars['String']['input'];
};

export type CheckoutPayload = {
  __typename?: 'CheckoutPayload';
  /** The PaymentIntent's client secret, only with REQUIRES_ACTION (and only to the order's member): Stripe.js needs it. */
  clientSecret?: Maybe<Scalars['String']['output']>;
  /** Null for COUPON_UNAVAILABLE, which wrote nothing. */
  order?: Maybe<Order>;
  status: CheckoutStatus;
};

export type CheckoutStatus =
  /** The coupon is held by another order, redeemed, voided or not yours. Nothing was written and nobody was charged. */
  | 'COUPON_UNAVAILABLE'
  /** The payment provider declined the payment: the order is CANCELED and its coupon given back. */
  | 'DECLINED'
  /** Paid now (or before, for a resend with the same Idempotency-Key). */
  | 'PAID'
  /** The outcome is not known yet (the provider did not answer in time, or answered that it is still working): the order stays PENDING_PAYMENT with its coupon held, and the server settles it; read it with `order`, or resend with the same Idempotency-Key. */
  | 'PENDING'
  /** The card asks for authentication (3-D Secure): finish it in the browser with Stripe.js, stripe.handleNextAction({ clientSecret }), then call confirmCheckout. The order stays PENDING_PAYMENT with its coupon held; an authentication not finished within PAYMENTS_ACTION_TIMEOUT_MS is given up (the order CANCELED, the coupon given back). */
  | 'REQUIRES_ACTION';

export type CleanupHuddlesPayload = {
  __typename?: 'CleanupHuddlesPayload';
  /** Members marked as left for a stale heartbeat. */
  participantsRemoved: Scalars['Int']['output'];
  /** Sessions ended because nobody was left. */
  sessionsEnded: Scalars['Int']['output'];
};

export type ConfirmCheckoutInput = {
  /** The order checkout answered REQUIRES_ACTION (or PENDING) for. */
  orderId: Scalars['UUID']['input'];
};

export type Contract = {
  __typename?: 'Contract';
  createdAt: Scalars['DateTime']['output'];
  /** The contract's first documents in number order (`first`: 1 to 1000). */
  documents: Array<ContractDocument>;
  id: Scalars['UUID']['output'];
  title: Scalars['String']['output'];
};


export type ContractDocumentsArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};

export type ContractDocument = {
  __typename?: 'ContractDocument';
  contractId: Scalars['UUID']['output'];
  createdAt: Scalars['DateTime']['output'];
  /** Per-tenant document number: from 10000000, never repeated, never skipped. */
  docNumber: Scalars['Int']['output'];
  id: Scalars['UUID']['output'];
};

export type Coupon = {
  __typename?: 'Coupon';
  amountYen: Scalars['Int']['output'];
  campaignId: Scalars['ID']['output'];
  /** Its campaign's couponsExpireAt: from then on it is EXPIRED unless redeemed or held; null: never. */
  expiresAt?: Maybe<Scalars['DateTime']['output']>;
  id: Scalars['UUID']['output'];
  /** When it was issued, on the database's clock. */
  issuedAt: Scalars['DateTime']['output'];
  memberId: Scalars['ID']['output'];
  /** The business month it counts in (YYYY-MM, BUSINESS_TIME_ZONE). */
  month: Scalars['String']['output'];
  /** As the answer read it: with the coupon where its statement read the coupon, else just after the mutation. */
  status: CouponStatus;
};

export type CouponStatus =
  /** Yours to redeem or to check out with. */
  | 'AVAILABLE'
  /** Its expiresAt has passed and it was neither redeemed nor held: it can no longer be redeemed or checked out with. A coupon an order held before it expired stays HELD, and pays for that order. */
  | 'EXPIRED'
  /** Held by one PENDING_PAYMENT order until its payment is known: then redeemed for it, or given back. */
  | 'HELD'
  /** Redeemed: by redeemCoupon, or for a paid order. */
  | 'REDEEMED'
  /** Voided (a duplicate from an adopted database); it can never be used. */
  | 'VOIDED';

export type CreateCampaignInput = {
  /** Budget leases (0 to 10000 coupons, with budgetSlots 1): each server process leases this many coupons' worth of the budget at a time and issues from its lease first; 0 (the default) takes every issue from the budget rows. */
  budgetLeaseCoupons?: InputMaybe<Scalars['Int']['input']>;
  /** Rows the budget is split over (1 to 64, at most budgetYen / discountYen), by whole coupons; more rows let a hot campaign issue in parallel. */
  budgetSlots?: InputMaybe<Scalars['Int']['input']>;
  /** The most the campaign may issue in all, in yen. */
  budgetYen: Scalars['Int']['input'];
  /** When its coupons expire, not before startsAt. Absent: never. */
  couponsExpireAt?: InputMaybe<Scalars['DateTime']['input']>;
  /** The value of each coupon: a positive whole number of yen. */
  discountYen: Scalars['Int']['input'];
  /** When issues end, after startsAt. Absent: no end. */
  endsAt?: InputMaybe<Scalars['DateTime']['input']>;
  /** 1 to 64 letters, digits, "_" or "-", unique in the tenant. */
  id: Scalars['ID']['input'];
  name: Scalars['String']['input'];
  /** When issues open. Absent: at creation. */
  startsAt?: InputMaybe<Scalars['DateTime']['input']>;
};

export type CreateCampaignPayload = {
  __typename?: 'CreateCampaignPayload';
  campaign: Campaign;
};

export type CreateContractDocumentInput = {
  contractId: Scalars['UUID']['input'];
};

export type CreateContractDocumentPayload = {
  __typename?: 'CreateContractDocumentPayload';
  document: ContractDocument;
};

export type CreateContractInput = {
  /** 1 to 200 characters. */
  title: Scalars['String']['input'];
};

export type CreateContractPayload = {
  __typename?: 'CreateContractPayload';
  contract: Contract;
};

export type CreateTenantInput = {
  /** 1 to 64 letters, digits, "_" or "-"; the x-hasura-tenant-id of its sessions. */
  id: Scalars['ID']['input'];
  monthlyCapYen?: InputMaybe<Scalars['Int']['input']>;
  name: Scalars['String']['input'];
};

export type CreateTenantPayload = {
  __typename?: 'CreateTenantPayload';
  tenant: Tenant;
};

export type HuddleInput = {
  /** 1 to 128 characters. */
  objectiveId: Scalars['ID']['input'];
};

export type HuddleParticipant = {
  __typename?: 'HuddleParticipant';
  joinedAt: Scalars['DateTime']['output'];
  lastHeartbeatAt: Scalars['DateTime']['output'];
  memberId: Scalars['ID']['output'];
};

export type HuddlePayload = {
  __typename?: 'HuddlePayload';
  /** The session the operation acted on, or the active one; null when the objective has none. */
  session?: Maybe<HuddleSession>;
  status: HuddleStatus;
};

export type HuddleSession = {
  __typename?: 'HuddleSession';
  endedAt?: Maybe<Scalars['DateTime']['output']>;
  id: Scalars['UUID']['output'];
  objectiveId: Scalars['ID']['output'];
  /** Members who have not left. */
  participants: Array<HuddleParticipant>;
  startedAt: Scalars['DateTime']['output'];
};

export type HuddleStatus =
  /** The member was already in the session; nothing changed. */
  | 'ALREADY_JOINED'
  /** The member's heartbeat was recorded. */
  | 'HEARTBEAT_RECORDED'
  /** The member is now in the session (a new session when none was active). */
  | 'JOINED'
  /** The member left; the session has ended if nobody is left (endedAt is set). */
  | 'LEFT'
  /** The member is not in an active session of this objective (never joined, left, or removed as stale); nothing changed. Join again. */
  | 'NOT_IN_HUDDLE';

export type IssueCouponInput = {
  campaignId: Scalars['ID']['input'];
};

export type IssueCouponPayload = {
  __typename?: 'IssueCouponPayload';
  coupon?: Maybe<Coupon>;
  status: IssueCouponStatus;
};

export type IssueCouponStatus =
  /** The member already holds this campaign's coupon; it is returned. */
  | 'ALREADY_ISSUED'
  /** The campaign's budget has no room for another coupon. Nothing was written. */
  | 'BUDGET_EXCEEDED'
  /** The campaign's endsAt has passed (on the database's clock). Nothing was written. */
  | 'ENDED'
  /** A new coupon was issued. */
  | 'ISSUED'
  /** The coupon would take the member's month over the tenant's cap. Nothing was written. */
  | 'MONTHLY_CAP'
  /** The campaign's startsAt has not come yet (on the database's clock). Nothing was written. */
  | 'NOT_STARTED';

/** Counters compared with the facts they summarise. */
export type LedgerReport = {
  __typename?: 'LedgerReport';
  campaignDrift: Array<CampaignDrift>;
  campaignsOverBudget: Array<CampaignOverBudget>;
  /** Member-months over the cap with adopted coupons only: legacy, not drift. */
  legacyMembersOverCap: Array<MemberOverCap>;
  /** Campaigns over budget by no more than they already were when adopted: legacy, not drift. */
  legacyOverspend: Array<CampaignOverBudget>;
  membersOverCap: Array<MemberOverCap>;
  /** True when every counter equals its facts and no limit is exceeded. */
  ok: Scalars['Boolean']['output'];
  usageDrift: Array<UsageDrift>;
};

export type MemberOverCap = {
  __typename?: 'MemberOverCap';
  capYen: Scalars['Int']['output'];
  couponsYen: Scalars['Int']['output'];
  memberId: Scalars['ID']['output'];
  month: Scalars['String']['output'];
  tenantId: Scalars['ID']['output'];
};

export type Mutation = {
  __typename?: 'Mutation';
  /** Sets a campaign's budget, raised or lowered, while its members issue: in force at once for every server process, with budget slots and leases alike; leased room not yet issued is taken back. Below what members hold it is BELOW_ISSUED and nothing changes. Tenant admin only. */
  changeCampaignBudget: ChangeCampaignBudgetPayload;
  /** Buys for amountYen less one of your coupons, paid with paymentMethod at the payment provider: PAID, DECLINED, REQUIRES_ACTION (finish the authentication with clientSecret, then confirmCheckout), or PENDING while the outcome is not known (not an error). Honours Idempotency-Key: a resend is the same order and the same charge. COUPON_UNAVAILABLE writes nothing and charges nobody. */
  checkout: CheckoutPayload;
  /** Runs one stale-huddle cleanup pass now (the worker runs one every HUDDLE_CLEANUP_INTERVAL_MS): the tenant's, or every tenant's for the platform operator. Admins only. */
  cleanupHuddles: CleanupHuddlesPayload;
  /** After the customer's browser finished (or failed) an authentication: asks the payment provider how the order's payment stands and settles it: PAID, DECLINED, still REQUIRES_ACTION, or PENDING. Your own orders only (another is NOT_FOUND); a settled order is answered as it stands. Honours Idempotency-Key. */
  confirmCheckout: CheckoutPayload;
  /** Creates a coupon campaign in the session's tenant. Tenant admin only. */
  createCampaign: CreateCampaignPayload;
  /** Creates a contract in the session's tenant. */
  createContract: CreateContractPayload;
  /** Issues the contract's next document with the tenant's next number. A contract of another tenant is NOT_FOUND. */
  createContractDocument: CreateContractDocumentPayload;
  /** Creates a tenant. Platform operator only (role operator). */
  createTenant: CreateTenantPayload;
  /** Records that the member is still in the objective's huddle; NOT_IN_HUDDLE (nothing changed) when they are not. */
  heartbeatHuddle: HuddlePayload;
  /** Issues the campaign's coupon to the session's member (x-hasura-user-id), at most once per campaign, within the campaign's period, the member's monthly cap and the campaign's budget. A refusal is a status, not an error. */
  issueCoupon: IssueCouponPayload;
  /** Puts the session's member into the objective's active huddle, starting one when none is active. Joining again is a no-op. */
  joinHuddle: HuddlePayload;
  /** Takes the member out of the objective's huddle; the last one out ends it. */
  leaveHuddle: HuddlePayload;
  /** Redeems one of the session's member's coupons, once: REDEEMED the first time, ALREADY_REDEEMED after. A voided coupon is refused (VOIDED), and so are one a checkout holds (HELD) and one past its expiresAt (EXPIRED); another member's coupon is NOT_FOUND. */
  redeemCoupon: RedeemCouponPayload;
  /** Refunds a PAID order of the tenant at the payment provider: amountYen of it, or all that is left. The order's refundedYen grows by what the provider refunded (REFUNDED once it is whole, which gives the coupon back), with one order.refunded event per refund. A refund beyond what is left is BAD_USER_INPUT and reaches nobody. Honours Idempotency-Key: a resend is the same refund, made once. */
  refundOrder: RefundOrderPayload;
};


export type MutationChangeCampaignBudgetArgs = {
  input: ChangeCampaignBudgetInput;
};


export type MutationCheckoutArgs = {
  input: CheckoutInput;
};


export type MutationConfirmCheckoutArgs = {
  input: ConfirmCheckoutInput;
};


export type MutationCreateCampaignArgs = {
  input: CreateCampaignInput;
};


export type MutationCreateContractArgs = {
  input: CreateContractInput;
};


export type MutationCreateContractDocumentArgs = {
  input: CreateContractDocumentInput;
};


export type MutationCreateTenantArgs = {
  input: CreateTenantInput;
};


export type MutationHeartbeatHuddleArgs = {
  input: HuddleInput;
};


export type MutationIssueCouponArgs = {
  input: IssueCouponInput;
};


export type MutationJoinHuddleArgs = {
  input: HuddleInput;
};


export type MutationLeaveHuddleArgs = {
  input: HuddleInput;
};


export type MutationRedeemCouponArgs = {
  input: RedeemCouponInput;
};


export type MutationRefundOrderArgs = {
  input: RefundOrderInput;
};

/** A purchase of a member, paid at the payment provider less one of their coupons. */
export type Order = {
  __typename?: 'Order';
  /** The price, in yen. */
  amountYen: Scalars['Int']['output'];
  /**
   * amountYen - discountYen: what the provider is asked for, also on an order that was never charged.
   * @deprecated Read dueYen (what is asked) or paidYen (what was paid): a canceled order was never charged.
   */
  chargedYen: Scalars['Int']['output'];
  couponId?: Maybe<Scalars['UUID']['output']>;
  createdAt: Scalars['DateTime']['output'];
  /** The coupon's value (0 without one); it may exceed the price. */
  discountYen: Scalars['Int']['output'];
  /** What the payment provider is asked for: amountYen - discountYen, never below 0. Asked, not paid: see paidYen. */
  dueYen: Scalars['Int']['output'];
  /** Why a CANCELED order's payment failed: Stripe's decline_code or code (card_declined, insufficient_funds, …). */
  failureCode?: Maybe<Scalars['String']['output']>;
  id: Scalars['UUID']['output'];
  memberId: Scalars['ID']['output'];
  /** What was paid: dueYen once the order is PAID (or REFUNDED; refunds are refundedYen), 0 while pending and when canceled. */
  paidYen: Scalars['Int']['output'];
  /** The payment provider's PaymentIntent (pi_…) of a settled order. */
  paymentIntentId?: Maybe<Scalars['String']['output']>;
  /** What the payment provider refunded of the charge: refundOrder's refunds and those made in Stripe's dashboard. */
  refundedYen: Scalars['Int']['output'];
  status: OrderStatus;
};

export type OrderStatus =
  /** The payment was declined, failed or given up: nothing was charged (paidYen 0), the coupon given back. */
  | 'CANCELED'
  /** Paid: one charge of dueYen, the coupon redeemed. A partial refund leaves it PAID (see refundedYen). */
  | 'PAID'
  /** Waiting for the payment (or for its customer to finish an authentication): its coupon is held, its outcome not known yet. */
  | 'PENDING_PAYMENT'
  /** Paid, then refunded whole (refundedYen equals paidYen): the coupon given back. */
  | 'REFUNDED';

export type OutboxStats = {
  __typename?: 'OutboxStats';
  /** Events that failed every attempt; they need a person. */
  dead: Scalars['Int']['output'];
  /** Age of the oldest pending event; null when none is pending. */
  oldestPendingAgeSeconds?: Maybe<Scalars['Float']['output']>;
  /** Events waiting for delivery (including ones waiting to be retried). */
  pending: Scalars['Int']['output'];
};

export type Query = {
  __typename?: 'Query';
  /** The audit trail, oldest first: the tenant's rows for its admin, every row for the platform operator. */
  auditLog: Array<AuditEntry>;
  /** A campaign of the session's tenant, or null. */
  campaign?: Maybe<Campaign>;
  /** The session's tenant's campaigns, newest first (`first`: 1 to 500). */
  campaigns: Array<Campaign>;
  /** A contract of the session's tenant, or null. */
  contract?: Maybe<Contract>;
  /** The session's tenant's newest contracts (`first`: 1 to 100). */
  contracts: Array<Contract>;
  /** The objective's active huddle in the session's tenant, or null. */
  huddle?: Maybe<HuddleSession>;
  /** Reconciliation of the tenant's coupon counters (every tenant for the platform operator). Admins only. */
  ledgerCheck: LedgerReport;
  /** The session's member's coupons, newest first (`first`: 1 to 500). */
  myCoupons: Array<Coupon>;
  /** One order: a member's own, or any of the tenant's for its admin; null when there is none. */
  order?: Maybe<Order>;
  /** Orders newest first: a member's own, every order of the tenant for its admin (`first`: 1 to 500). */
  orders: Array<Order>;
  /** The notification outbox of the session's tenant (every tenant for the platform operator). Admins only. */
  outboxStats: OutboxStats;
  /** The session's tenant. */
  tenant?: Maybe<Tenant>;
  /** The session of this request, or null when anonymous. */
  viewer?: Maybe<Viewer>;
};


export type QueryAuditLogArgs = {
  after?: InputMaybe<Scalars['ID']['input']>;
  limit?: InputMaybe<Scalars['Int']['input']>;
};


export type QueryCampaignArgs = {
  id: Scalars['ID']['input'];
};


export type QueryCampaignsArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};


export type QueryContractArgs = {
  id: Scalars['UUID']['input'];
};


export type QueryContractsArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};


export type QueryHuddleArgs = {
  objectiveId: Scalars['ID']['input'];
};


export type QueryMyCouponsArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};


export type QueryOrderArgs = {
  id: Scalars['UUID']['input'];
};


export type QueryOrdersArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};

export type RedeemCouponInput = {
  couponId: Scalars['UUID']['input'];
};

export type RedeemCouponPayload = {
  __typename?: 'RedeemCouponPayload';
  coupon: Coupon;
  /** When the coupon was redeemed (this time or the first time); null when it is voided, held or expired. */
  redeemedAt?: Maybe<Scalars['DateTime']['output']>;
  status: RedeemCouponStatus;
};

export type RedeemCouponStatus =
  /** The coupon was redeemed before; redeemedAt says when. Nothing changed. */
  | 'ALREADY_REDEEMED'
  /** The coupon's expiresAt has passed (on the database's clock): it can no longer be redeemed. Nothing was written. */
  | 'EXPIRED'
  /** A checkout's order holds the coupon while its payment is not known: it is redeemed for that order or given back. Nothing was written. */
  | 'HELD'
  /** The coupon is redeemed now, by this request. */
  | 'REDEEMED'
  /** The coupon was voided and cannot be redeemed. Nothing was written. */
  | 'VOIDED';

export type RefundOrderInput = {
  /** The yen to refund, at most what is left of the charge; omitted: all that is left. */
  amountYen?: InputMaybe<Scalars['Int']['input']>;
  /** A PAID order of your tenant. */
  orderId: Scalars['UUID']['input'];
};

export type RefundOrderPayload = {
  __typename?: 'RefundOrderPayload';
  /** The order as it stands: refundedYen grown by the refund once the provider made it (REFUNDED once it is whole). */
  order: Order;
};

export type Tenant = {
  __typename?: 'Tenant';
  createdAt: Scalars['DateTime']['output'];
  id: Scalars['ID']['output'];
  /** A member's coupon total per calendar month, in yen. */
  monthlyCapYen: Scalars['Int']['output'];
  name: Scalars['String']['output'];
};

export type UsageDrift = {
  __typename?: 'UsageDrift';
  /** The sum of the member's coupons in the month. */
  couponsYen: Scalars['Int']['output'];
  memberId: Scalars['ID']['output'];
  month: Scalars['String']['output'];
  tenantId: Scalars['ID']['output'];
  /** The member-month counter. */
  usedYen: Scalars['Int']['output'];
};

/** Who the server thinks is calling: handy for checking headers in GraphiQL. */
export type Viewer = {
  __typename?: 'Viewer';
  role: Scalars['String']['output'];
  tenantId?: Maybe<Scalars['String']['output']>;
  userId?: Maybe<Scalars['String']['output']>;
};

export type CreateTenantMutationVariables = Exact<{
  input: CreateTenantInput;
}>;


export type CreateTenantMutation = { __typename?: 'Mutation', createTenant: { __typename?: 'CreateTenantPayload', tenant: { __typename?: 'Tenant', id: string, name: string, monthlyCapYen: number, createdAt: string } } };

export type CreateContractMutationVariables = Exact<{
  input: CreateContractInput;
}>;


export type CreateContractMutation = { __typename?: 'Mutation', createContract: { __typename?: 'CreateContractPayload', contract: { __typename?: 'Contract', id: string, title: string, createdAt: string } } };

export type CreateContractDocumentMutationVariables = Exact<{
  input: CreateContractDocumentInput;
}>;


export type CreateContractDocumentMutation = { __typename?: 'Mutation', createContractDocument: { __typename?: 'CreateContractDocumentPayload', document: { __typename?: 'ContractDocument', id: string, contractId: string, docNumber: number, createdAt: string } } };

export type ContractQueryVariables = Exact<{
  id: Scalars['UUID']['input'];
}>;


export type ContractQuery = { __typename?: 'Query', contract?: { __typename?: 'Contract', id: string, title: string, documents: Array<{ __typename?: 'ContractDocument', id: string, contractId: string, docNumber: number }> } | null };

export type ViewerQueryVariables = Exact<{ [key: string]: never; }>;


export type ViewerQuery = { __typename?: 'Query', viewer?: { __typename?: 'Viewer', role: string, tenantId?: string | null, userId?: string | null } | null };

export type AuditLogQueryVariables = Exact<{
  limit?: InputMaybe<Scalars['Int']['input']>;
  after?: InputMaybe<Scalars['ID']['input']>;
}>;


export type AuditLogQuery = { __typename?: 'Query', auditLog: Array<{ __typename?: 'AuditEntry', id: string, tenantId: string, actorUserId?: string | null, role: string, operation: string, entityIds: Array<string>, requestId: string, createdAt: string }> };

export type CreateCampaignMutationVariables = Exact<{
  input: CreateCampaignInput;
}>;


export type CreateCampaignMutation = { __typename?: 'Mutation', createCampaign: { __typename?: 'CreateCampaignPayload', campaign: { __typename?: 'Campaign', id: string, name: string, discountYen: number, budgetYen: number, budgetSlots: number, issuedYen: number, remainingYen: number, startsAt: string, endsAt?: string | null, couponsExpireAt?: string | null } } };

export type ChangeCampaignBudgetMutationVariables = Exact<{
  input: ChangeCampaignBudgetInput;
}>;


export type ChangeCampaignBudgetMutation = { __typename?: 'Mutation', changeCampaignBudget: { __typename?: 'ChangeCampaignBudgetPayload', status: ChangeCampaignBudgetStatus, campaign: { __typename?: 'Campaign', id: string, budgetYen: number, budgetSlots: number, budgetLeaseCoupons: number, issuedYen: number, remainingYen: number } } };

export type IssueCouponMutationVariables = Exact<{
  input: IssueCouponInput;
}>;


export type IssueCouponMutation = { __typename?: 'Mutation', issueCoupon: { __typename?: 'IssueCouponPayload', status: IssueCouponStatus, coupon?: { __typename?: 'Coupon', id: string, campaignId: string, memberId: string, month: string, amountYen: number, issuedAt: string, expiresAt?: string | null } | null } };

export type RedeemCouponMutationVariables = Exact<{
  input: RedeemCouponInput;
}>;


export type RedeemCouponMutation = { __typename?: 'Mutation', redeemCoupon: { __typename?: 'RedeemCouponPayload', status: RedeemCouponStatus, redeemedAt?: string | null, coupon: { __typename?: 'Coupon', id: string, campaignId: string, memberId: string, month: string, amountYen: number, issuedAt: string, expiresAt?: string | null, status: CouponStatus } } };

export type CampaignQueryVariables = Exact<{
  id: Scalars['ID']['input'];
}>;


export type CampaignQuery = { __typename?: 'Query', campaign?: { __typename?: 'Campaign', id: string, name: string, discountYen: number, budgetYen: number, budgetSlots: number, issuedYen: number, remainingYen: number, startsAt: string, endsAt?: string | null, couponsExpireAt?: string | null } | null };

export type MyCouponsQueryVariables = Exact<{ [key: string]: never; }>;


export type MyCouponsQuery = { __typename?: 'Query', myCoupons: Array<{ __typename?: 'Coupon', id: string, campaignId: string, memberId: string, month: string, amountYen: number, issuedAt: string, expiresAt?: string | null, status: CouponStatus }> };

export type OutboxStatsQueryVariables = Exact<{ [key: string]: never; }>;


export type OutboxStatsQuery = { __typename?: 'Query', outboxStats: { __typename?: 'OutboxStats', pending: number, dead: number, oldestPendingAgeSeconds?: number | null } };

export type LedgerCheckQueryVariables = Exact<{ [key: string]: never; }>;


export type LedgerCheckQuery = { __typename?: 'Query', ledgerCheck: { __typename?: 'LedgerReport', ok: boolean, campaignDrift: Array<{ __typename?: 'CampaignDrift', tenantId: string, campaignId: string, issuedYen: number, couponsYen: number }>, usageDrift: Array<{ __typename?: 'UsageDrift', tenantId: string, memberId: string, month: string, usedYen: number, couponsYen: number }>, membersOverCap: Array<{ __typename?: 'MemberOverCap', tenantId: string, memberId: string, month: string, couponsYen: number, capYen: number }>, campaignsOverBudget: Array<{ __typename?: 'CampaignOverBudget', tenantId: string, campaignId: string, budgetYen: number, couponsYen: number }>, legacyOverspend: Array<{ __typename?: 'CampaignOverBudget', tenantId: string, campaignId: string, budgetYen: number, couponsYen: number }>, legacyMembersOverCap: Array<{ __typename?: 'MemberOverCap', tenantId: string, memberId: string, month: string, couponsYen: number, capYen: number }> } };

export type HuddleSessionFieldsFragment = { __typename?: 'HuddleSession', id: string, objectiveId: string, startedAt: string, endedAt?: string | null, participants: Array<{ __typename?: 'HuddleParticipant', memberId: string, joinedAt: string, lastHeartbeatAt: string }> };

export type JoinHuddleMutationVariables = Exact<{
  input: HuddleInput;
}>;


export type JoinHuddleMutation = { __typename?: 'Mutation', joinHuddle: { __typename?: 'HuddlePayload', status: HuddleStatus, session?: { __typename?: 'HuddleSession', id: string, objectiveId: string, startedAt: string, endedAt?: string | null, participants: Array<{ __typename?: 'HuddleParticipant', memberId: string, joinedAt: string, lastHeartbeatAt: string }> } | null } };

export type HeartbeatHuddleMutationVariables = Exact<{
  input: HuddleInput;
}>;


export type HeartbeatHuddleMutation = { __typename?: 'Mutation', heartbeatHuddle: { __typename?: 'HuddlePayload', status: HuddleStatus, session?: { __typename?: 'HuddleSession', id: string, objectiveId: string, startedAt: string, endedAt?: string | null, participants: Array<{ __typename?: 'HuddleParticipant', memberId: string, joinedAt: string, lastHeartbeatAt: string }> } | null } };

export type LeaveHuddleMutationVariables = Exact<{
  input: HuddleInput;
}>;


export type LeaveHuddleMutation = { __typename?: 'Mutation', leaveHuddle: { __typename?: 'HuddlePayload', status: HuddleStatus, session?: { __typename?: 'HuddleSession', id: string, objectiveId: string, startedAt: string, endedAt?: string | null, participants: Array<{ __typename?: 'HuddleParticipant', memberId: string, joinedAt: string, lastHeartbeatAt: string }> } | null } };

export type CleanupHuddlesMutationVariables = Exact<{ [key: string]: never; }>;


export type CleanupHuddlesMutation = { __typename?: 'Mutation', cleanupHuddles: { __typename?: 'CleanupHuddlesPayload', participantsRemoved: number, sessionsEnded: number } };

export type HuddleQueryVariables = Exact<{
  objectiveId: Scalars['ID']['input'];
}>;


export type HuddleQuery = { __typename?: 'Query', huddle?: { __typename?: 'HuddleSession', id: string, objectiveId: string, startedAt: string, endedAt?: string | null, participants: Array<{ __typename?: 'HuddleParticipant', memberId: string, joinedAt: string, lastHeartbeatAt: string }> } | null };

export type OrderFieldsFragment = { __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string };

export type CheckoutMutationVariables = Exact<{
  input: CheckoutInput;
}>;


export type CheckoutMutation = { __typename?: 'Mutation', checkout: { __typename?: 'CheckoutPayload', status: CheckoutStatus, clientSecret?: string | null, order?: { __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string } | null } };

export type ConfirmCheckoutMutationVariables = Exact<{
  input: ConfirmCheckoutInput;
}>;


export type ConfirmCheckoutMutation = { __typename?: 'Mutation', confirmCheckout: { __typename?: 'CheckoutPayload', status: CheckoutStatus, clientSecret?: string | null, order?: { __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string } | null } };

export type RefundOrderMutationVariables = Exact<{
  input: RefundOrderInput;
}>;


export type RefundOrderMutation = { __typename?: 'Mutation', refundOrder: { __typename?: 'RefundOrderPayload', order: { __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string } } };

export type OrderQueryVariables = Exact<{
  id: Scalars['UUID']['input'];
}>;


export type OrderQuery = { __typename?: 'Query', order?: { __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string } | null };

export type OrdersQueryVariables = Exact<{
  first?: InputMaybe<Scalars['Int']['input']>;
}>;


export type OrdersQuery = { __typename?: 'Query', orders: Array<{ __typename?: 'Order', id: string, memberId: string, status: OrderStatus, amountYen: number, discountYen: number, dueYen: number, paidYen: number, refundedYen: number, failureCode?: string | null, couponId?: string | null, paymentIntentId?: string | null, createdAt: string }> };

export const HuddleSessionFieldsFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"HuddleSessionFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleSession"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"objectiveId"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"participants"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"joinedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastHeartbeatAt"}}]}}]}}]} as unknown as DocumentNode<HuddleSessionFieldsFragment, unknown>;
export const OrderFieldsFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<OrderFieldsFragment, unknown>;
export const CreateTenantDocument = {"__meta__":{"hash":"a89ccf052e4d723d46cff4571044ac6ea710f6cfb88be7895f96c3b4861bce92"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateTenant"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTenantInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createTenant"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenant"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"monthlyCapYen"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateTenantMutation, CreateTenantMutationVariables>;
export const CreateContractDocument = {"__meta__":{"hash":"8e6d569713a282aeb133e1cbe9c84cc134413d214943db254b7bf7dbba7623e7"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateContract"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateContractInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createContract"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"contract"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateContractMutation, CreateContractMutationVariables>;
export const CreateContractDocumentDocument = {"__meta__":{"hash":"76713123f1103181b12ef8ad2e7db9f26a28b04a75efbba6dc6e3e4bb82ca0dc"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateContractDocument"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateContractDocumentInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createContractDocument"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"document"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"contractId"}},{"kind":"Field","name":{"kind":"Name","value":"docNumber"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateContractDocumentMutation, CreateContractDocumentMutationVariables>;
export const ContractDocument = {"__meta__":{"hash":"9e8b1465bb6b7e6198737b8a1cd7e3dd3452114811a90d4e3a40eac2bdac3632"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Contract"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UUID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"contract"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"documents"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"contractId"}},{"kind":"Field","name":{"kind":"Name","value":"docNumber"}}]}}]}}]}}]} as unknown as DocumentNode<ContractQuery, ContractQueryVariables>;
export const ViewerDocument = {"__meta__":{"hash":"ebe997e6bbb8a453cb5dfb9f66e360b98aec57c7a73897e29930d89d2c549696"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"role"}},{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"userId"}}]}}]}}]} as unknown as DocumentNode<ViewerQuery, ViewerQueryVariables>;
export const AuditLogDocument = {"__meta__":{"hash":"ca2b1341fdfb71d1a5abe07ed24b26da915c9ebe49750419264aafbae989eaec"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"AuditLog"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"limit"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"auditLog"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"limit"},"value":{"kind":"Variable","name":{"kind":"Name","value":"limit"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"actorUserId"}},{"kind":"Field","name":{"kind":"Name","value":"role"}},{"kind":"Field","name":{"kind":"Name","value":"operation"}},{"kind":"Field","name":{"kind":"Name","value":"entityIds"}},{"kind":"Field","name":{"kind":"Name","value":"requestId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]} as unknown as DocumentNode<AuditLogQuery, AuditLogQueryVariables>;
export const CreateCampaignDocument = {"__meta__":{"hash":"c6f2667c211589f3a7492518b26e301484603f59e6f378613cfced31b260fd08"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateCampaign"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateCampaignInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createCampaign"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"campaign"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"budgetYen"}},{"kind":"Field","name":{"kind":"Name","value":"budgetSlots"}},{"kind":"Field","name":{"kind":"Name","value":"issuedYen"}},{"kind":"Field","name":{"kind":"Name","value":"remainingYen"}},{"kind":"Field","name":{"kind":"Name","value":"startsAt"}},{"kind":"Field","name":{"kind":"Name","value":"endsAt"}},{"kind":"Field","name":{"kind":"Name","value":"couponsExpireAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateCampaignMutation, CreateCampaignMutationVariables>;
export const ChangeCampaignBudgetDocument = {"__meta__":{"hash":"a8fabfe398760c3ee624501c64028228ce174330804baf7ad834270a9bd79a55"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"ChangeCampaignBudget"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ChangeCampaignBudgetInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"changeCampaignBudget"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"campaign"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"budgetYen"}},{"kind":"Field","name":{"kind":"Name","value":"budgetSlots"}},{"kind":"Field","name":{"kind":"Name","value":"budgetLeaseCoupons"}},{"kind":"Field","name":{"kind":"Name","value":"issuedYen"}},{"kind":"Field","name":{"kind":"Name","value":"remainingYen"}}]}}]}}]}}]} as unknown as DocumentNode<ChangeCampaignBudgetMutation, ChangeCampaignBudgetMutationVariables>;
export const IssueCouponDocument = {"__meta__":{"hash":"36b14005604283a6ed408e44c398b4545b9ad5e9536a9bd0b22c8f6a83796bb5"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"IssueCoupon"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"IssueCouponInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"issueCoupon"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"coupon"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"issuedAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}}]}}]}}]}}]} as unknown as DocumentNode<IssueCouponMutation, IssueCouponMutationVariables>;
export const RedeemCouponDocument = {"__meta__":{"hash":"ba710a27f1be3a61b02f87ed43033a38f769c00754dc7aeb3a3ee0959259f930"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"RedeemCoupon"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"RedeemCouponInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"redeemCoupon"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"redeemedAt"}},{"kind":"Field","name":{"kind":"Name","value":"coupon"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"issuedAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}}]}}]}}]}}]} as unknown as DocumentNode<RedeemCouponMutation, RedeemCouponMutationVariables>;
export const CampaignDocument = {"__meta__":{"hash":"26f6ed4a26101b63965a21003485a63f768afc86ae7d80a22e3f6048917547bc"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Campaign"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"campaign"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"budgetYen"}},{"kind":"Field","name":{"kind":"Name","value":"budgetSlots"}},{"kind":"Field","name":{"kind":"Name","value":"issuedYen"}},{"kind":"Field","name":{"kind":"Name","value":"remainingYen"}},{"kind":"Field","name":{"kind":"Name","value":"startsAt"}},{"kind":"Field","name":{"kind":"Name","value":"endsAt"}},{"kind":"Field","name":{"kind":"Name","value":"couponsExpireAt"}}]}}]}}]} as unknown as DocumentNode<CampaignQuery, CampaignQueryVariables>;
export const MyCouponsDocument = {"__meta__":{"hash":"969ecb59a48803a07e1fcf21468f66f0c3fa8757fbf0d10b915dcbe084eee529"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"MyCoupons"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"myCoupons"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"issuedAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}}]}}]}}]} as unknown as DocumentNode<MyCouponsQuery, MyCouponsQueryVariables>;
export const OutboxStatsDocument = {"__meta__":{"hash":"caa356005979e5e2033cd2d13481090558e19359097632596835be47953579d3"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"OutboxStats"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"outboxStats"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"pending"}},{"kind":"Field","name":{"kind":"Name","value":"dead"}},{"kind":"Field","name":{"kind":"Name","value":"oldestPendingAgeSeconds"}}]}}]}}]} as unknown as DocumentNode<OutboxStatsQuery, OutboxStatsQueryVariables>;
export const LedgerCheckDocument = {"__meta__":{"hash":"ce545ff6386dea37c1af7fbdfe56a37502d5b635175eda25d78dc88d4defbda8"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"LedgerCheck"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"ledgerCheck"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"ok"}},{"kind":"Field","name":{"kind":"Name","value":"campaignDrift"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"issuedYen"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}}]}},{"kind":"Field","name":{"kind":"Name","value":"usageDrift"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"usedYen"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}}]}},{"kind":"Field","name":{"kind":"Name","value":"membersOverCap"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}},{"kind":"Field","name":{"kind":"Name","value":"capYen"}}]}},{"kind":"Field","name":{"kind":"Name","value":"campaignsOverBudget"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"budgetYen"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}}]}},{"kind":"Field","name":{"kind":"Name","value":"legacyOverspend"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"campaignId"}},{"kind":"Field","name":{"kind":"Name","value":"budgetYen"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}}]}},{"kind":"Field","name":{"kind":"Name","value":"legacyMembersOverCap"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"month"}},{"kind":"Field","name":{"kind":"Name","value":"couponsYen"}},{"kind":"Field","name":{"kind":"Name","value":"capYen"}}]}}]}}]}}]} as unknown as DocumentNode<LedgerCheckQuery, LedgerCheckQueryVariables>;
export const JoinHuddleDocument = {"__meta__":{"hash":"41cd65b9b3ac87749c777b022f5675373b179d7ac57b0cdc816c463460f94c69"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"JoinHuddle"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"joinHuddle"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"session"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"HuddleSessionFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"HuddleSessionFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleSession"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"objectiveId"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"participants"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"joinedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastHeartbeatAt"}}]}}]}}]} as unknown as DocumentNode<JoinHuddleMutation, JoinHuddleMutationVariables>;
export const HeartbeatHuddleDocument = {"__meta__":{"hash":"f75498e40a0e2b122c690306b62aa58fc9d83149d66b92133774c70daedd0f0e"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"HeartbeatHuddle"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"heartbeatHuddle"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"session"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"HuddleSessionFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"HuddleSessionFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleSession"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"objectiveId"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"participants"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"joinedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastHeartbeatAt"}}]}}]}}]} as unknown as DocumentNode<HeartbeatHuddleMutation, HeartbeatHuddleMutationVariables>;
export const LeaveHuddleDocument = {"__meta__":{"hash":"3be037495515c0a2597748a89cebcf81fb78e6791679df1caba3acb9476861f5"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"LeaveHuddle"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"leaveHuddle"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"session"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"HuddleSessionFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"HuddleSessionFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleSession"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"objectiveId"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"participants"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"joinedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastHeartbeatAt"}}]}}]}}]} as unknown as DocumentNode<LeaveHuddleMutation, LeaveHuddleMutationVariables>;
export const CleanupHuddlesDocument = {"__meta__":{"hash":"c667e2e3e3fb00fc49243e652af3dcef152cd21790a652797a1cff2003ea2f39"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CleanupHuddles"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"cleanupHuddles"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"participantsRemoved"}},{"kind":"Field","name":{"kind":"Name","value":"sessionsEnded"}}]}}]}}]} as unknown as DocumentNode<CleanupHuddlesMutation, CleanupHuddlesMutationVariables>;
export const HuddleDocument = {"__meta__":{"hash":"0b2c30e289e4b177b32852b39e50f66d34d64d903ae19d82a7b10fdee89a8ae8"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Huddle"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"objectiveId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"huddle"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"objectiveId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"objectiveId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"HuddleSessionFields"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"HuddleSessionFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"HuddleSession"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"objectiveId"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"participants"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"joinedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastHeartbeatAt"}}]}}]}}]} as unknown as DocumentNode<HuddleQuery, HuddleQueryVariables>;
export const CheckoutDocument = {"__meta__":{"hash":"3884e45203d3eef8e1b444b218b1ef13be17010371c0d7ac800c9d06e0b9aee9"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"Checkout"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CheckoutInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"checkout"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"clientSecret"}},{"kind":"Field","name":{"kind":"Name","value":"order"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"OrderFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<CheckoutMutation, CheckoutMutationVariables>;
export const ConfirmCheckoutDocument = {"__meta__":{"hash":"728af4ffdac8acd1f410163ff1cc092418649a4bf4ba5ebc06f9d389a103595d"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"ConfirmCheckout"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ConfirmCheckoutInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"confirmCheckout"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"clientSecret"}},{"kind":"Field","name":{"kind":"Name","value":"order"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"OrderFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<ConfirmCheckoutMutation, ConfirmCheckoutMutationVariables>;
export const RefundOrderDocument = {"__meta__":{"hash":"9667bf2e9c4d6ca81f021986860d29b73044c0d08435cf89619b3aae47775da4"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"RefundOrder"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"RefundOrderInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"refundOrder"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"order"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"OrderFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<RefundOrderMutation, RefundOrderMutationVariables>;
export const OrderDocument = {"__meta__":{"hash":"d35436d106fdf67e1d034ded138fae6187ac6869a20146c556dde82df2c68e58"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Order"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UUID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"order"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"OrderFields"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<OrderQuery, OrderQueryVariables>;
export const OrdersDocument = {"__meta__":{"hash":"16016b4090376cb2bb6586fefd060316e0cb79ddbd31ec04a3d7ea339df0f769"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Orders"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"orders"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"OrderFields"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"OrderFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Order"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"memberId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"amountYen"}},{"kind":"Field","name":{"kind":"Name","value":"discountYen"}},{"kind":"Field","name":{"kind":"Name","value":"dueYen"}},{"kind":"Field","name":{"kind":"Name","value":"paidYen"}},{"kind":"Field","name":{"kind":"Name","value":"refundedYen"}},{"kind":"Field","name":{"kind":"Name","value":"failureCode"}},{"kind":"Field","name":{"kind":"Name","value":"couponId"}},{"kind":"Field","name":{"kind":"Name","value":"paymentIntentId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]} as unknown as DocumentNode<OrdersQuery, OrdersQueryVariables>;