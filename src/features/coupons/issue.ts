/** What an issue of a coupon is asked and answers, whichever way it is decided (issue-transaction.ts, one-statement.ts). */

export type IssueStatus = 'ISSUED' | 'ALREADY_ISSUED' | 'NOT_STARTED' | 'ENDED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED';

export interface Coupon {
  id: string;
  campaignId: string;
  memberId: string;
  month: string;
  amountYen: number;
  issuedAt: Date;
  /** Its campaign's couponsExpireAt; null: never. */
  expiresAt: Date | null;
}

export interface IssueResult {
  status: IssueStatus;
  coupon: Coupon | null;
}

export interface IssueRequest {
  tenantId: string;
  memberId: string;
  campaignId: string;
  /** Of business months: the coupon's month is its issue time's there (the database's clock, period.ts). */
  timeZone: string;
}

/** What issueCoupon's audit row names: the coupon and its campaign, or the campaign asked for when none was issued. */
export const issueEntities = (result: IssueResult, request: IssueRequest): string[] =>
  result.coupon ? [result.coupon.id, result.coupon.campaignId] : [request.campaignId];

export const COUPON_ISSUED_TOPIC = 'coupon.issued';
