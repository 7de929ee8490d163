import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Transaction } from 'kysely';
import { businessMonth } from './process-clock.js';
import type { CouponIssuer, IssueRequest, IssueResult } from '../../src/features/coupons/issue.js';
import { COUPON_ISSUED_TOPIC } from '../../src/features/coupons/issue-statement.js';
import type { Isolation } from '../../src/db/transaction.js';
import type { DB } from '../../src/db/schema.js';
import { notFound } from '../../src/core/errors.js';

/** Stands in for the push notification the naive version sent from inside its transaction. */
const NOTIFICATION_CALL_MS = 2;

export interface ReadCheckWriteOptions {
  name: string;
  isolation?: Isolation;
  /** Call the notifier inside the transaction (the naive way) instead of writing an outbox row. */
  notifyInline: boolean;
  /** Locks to take before reading, for the advisory-lock peer. */
  lockFirst?: (trx: Transaction<DB>, request: IssueRequest) => Promise<void>;
  /**
   * The clock that judges the campaign's period and stamps the coupon: the process's own, for the
   * naive twin of the one clock. Absent: the database's (its transaction's now()), as the product reads it.
   */
  clock?: () => Date;
}

/**
 * The read-check-write issue this project replaced: it reads the counters, decides in TypeScript
 * and writes absolute values back. On READ COMMITTED with no lock, two requests that read the same
 * counters both pass the checks (lost updates, overspent budgets, members over the cap). The
 * benchmark's SERIALIZABLE and advisory-lock peers run this same code made safe by isolation or
 * by locks taken first.
 */
export function readCheckWriteIssuer(options: ReadCheckWriteOptions): CouponIssuer {
  return {
    name: options.name,
    ...(options.isolation ? { isolation: options.isolation } : {}),
    issue: async (trx, request) => {
      await options.lockFirst?.(trx, request);
      return readCheckWrite(trx, request, options);
    },
  };
}

/** The version kept to prove the tests can fail: no lock, notifier called inside the transaction. */
export const naiveIssuer = readCheckWriteIssuer({ name: 'naive read-check-write', notifyInline: true });

async function readCheckWrite(trx: Transaction<DB>, request: IssueRequest, options: ReadCheckWriteOptions): Promise<IssueResult> {
  const { tenantId, memberId, campaignId } = request;
  const campaign = await trx
    .selectFrom('campaigns')
    .select(['discount_yen', 'starts_at', 'ends_at', 'coupons_expire_at', sql<Date>`date_trunc('milliseconds', now())`.as('now')])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', campaignId)
    .executeTakeFirst();
  if (!campaign) throw notFound('Campaign');
  const amount = campaign.discount_yen;
  const now = options.clock?.() ?? campaign.now;
  if (now < campaign.starts_at) return { status: 'NOT_STARTED', coupon: null };
  if (campaign.ends_at && now >= campaign.ends_at) return { status: 'ENDED', coupon: null };
  const month = businessMonth(now, request.timeZone);

  const existing = await trx
    .selectFrom('coupons')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('member_id', '=', memberId)
    .executeTakeFirst();
  if (existing) return { status: 'ALREADY_ISSUED', coupon: null };

  const tenant = await trx.selectFrom('tenants').select('monthly_cap_yen').where('id', '=', tenantId).executeTakeFirstOrThrow();
  const usage = await trx
    .selectFrom('member_monthly_usage')
    .select('used_yen')
    .where('tenant_id', '=', tenantId)
    .where('member_id', '=', memberId)
    .where('month', '=', month)
    .executeTakeFirst();
  const used = usage?.used_yen ?? 0;
  if (used + amount > tenant.monthly_cap_yen) return { status: 'MONTHLY_CAP', coupon: null };

  const budget = await trx
    .selectFrom('campaign_budget_slots')
    .select(['issued_yen', 'budget_yen'])
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('slot', '=', 0)
    .executeTakeFirstOrThrow();
  if (budget.issued_yen + amount > budget.budget_yen) return { status: 'BUDGET_EXCEEDED', coupon: null };

  const coupon = await trx
    .insertInto('coupons')
    .values({ tenant_id: tenantId, campaign_id: campaignId, member_id: memberId, month, amount_yen: amount, issued_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
  await trx
    .insertInto('member_monthly_usage')
    .values({ tenant_id: tenantId, member_id: memberId, month, used_yen: used + amount })
    .onConflict((oc) => oc.columns(['tenant_id', 'member_id', 'month']).doUpdateSet({ used_yen: used + amount }))
    .execute();
  await trx
    .updateTable('campaign_budget_slots')
    .set({ issued_yen: budget.issued_yen + amount })
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('slot', '=', 0)
    .execute();
  const issued = {
    id: coupon.id,
    campaignId,
    memberId,
    month,
    amountYen: amount,
    issuedAt: coupon.issued_at,
    expiresAt: campaign.coupons_expire_at,
  };
  if (options.notifyInline) {
    await sleep(NOTIFICATION_CALL_MS);
  } else {
    await trx
      .insertInto('outbox_events')
      .values({ tenant_id: tenantId, topic: COUPON_ISSUED_TOPIC, payload: JSON.stringify({ ...issued, tenantId }) })
      .execute();
  }
  return { status: 'ISSUED', coupon: issued };
}
