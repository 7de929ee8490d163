import { print } from 'graphql';
import { COUPON_REDEEMED_TOPIC } from '../../src/features/coupons/redeem.js';
import { CreateCampaignDocument, IssueCouponDocument, RedeemCouponDocument } from '../generated/graphql.js';
import { LoadClient, runReleasedTogether } from '../load/client.js';
import { asTenantAdmin, asUser, createTenant, gqlOk, serveOverHttp, type TestBackend } from './harness.js';

export interface RedeemScenarioResult {
  requests: number;
  /** Per coupon: how many answers said REDEEMED. */
  redeemedAnswers: Map<string, number>;
  /** Per coupon: `coupon.redeemed` events in the outbox, counted with SQL. */
  events: Map<string, number>;
  /** Answers that were not REDEEMED or ALREADY_REDEEMED (an error code or HTTP status). */
  failures: string[];
  /** Coupons whose answers disagree on redeemedAt, or whose stored redeemed_at none of them names. */
  timeDisagreements: string[];
  /** redeemCoupon audit rows, counted with SQL, and the answers that committed (each must have one). */
  auditRows: number;
  committedAnswers: number;
}

/**
 * One member holds `coupons` coupons (one per campaign) and sends `perCoupon` redeems of each, all
 * released together over real HTTP; then the outbox, the coupons and the audit trail are counted
 * with SQL. The requests are interleaved so that every coupon has several redeems in flight at
 * once: one member's requests take their turns in the order sent, so at any moment the requests
 * executing hold every coupon, each more than once. Mutations go through the typed client
 * (resent with their key after a TRY_AGAIN), so a busy machine changes the timing, not the answers.
 */
export async function runRedeemScenario(
  backend: TestBackend,
  options: { tenantId: string; coupons: number; perCoupon: number },
): Promise<RedeemScenarioResult> {
  const { tenantId, coupons, perCoupon } = options;
  const member = 'redeemer';
  await createTenant(backend, tenantId, 1_000_000);
  const couponIds: string[] = [];
  for (let i = 0; i < coupons; i++) {
    const campaignId = `redeem-${i}`;
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: campaignId, name: campaignId, discountYen: 100, budgetYen: 10_000 } },
      asTenantAdmin(tenantId),
    );
    const issued = await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId } }, asUser(tenantId, member));
    couponIds.push(issued.issueCoupon.coupon!.id);
  }

  const { url, server } = await serveOverHttp(backend);
  const total = coupons * perCoupon;
  const client = new LoadClient(url, total, { resend: true });
  const query = print(RedeemCouponDocument);
  try {
    await client.open();
    const tasks = Array.from({ length: total }, (_, i) => {
      const couponId = couponIds[i % coupons]!;
      return async () => ({ couponId, reply: await client.graphql(query, { input: { couponId } }, asUser(tenantId, member)) });
    });
    const replies = await runReleasedTogether(tasks, total);

    const redeemedAnswers = new Map(couponIds.map((id) => [id, 0]));
    const answeredTimes = new Map(couponIds.map((id) => [id, new Set<string>()]));
    const failures: string[] = [];
    let committedAnswers = 0;
    for (const { couponId, reply } of replies) {
      const answer = reply.body.data?.['redeemCoupon'] as { status: string; redeemedAt: string | null } | undefined;
      if (!answer || (answer.status !== 'REDEEMED' && answer.status !== 'ALREADY_REDEEMED')) {
        failures.push(String(reply.body.errors?.[0]?.extensions?.['code'] ?? answer?.status ?? `HTTP ${reply.status}`));
        continue;
      }
      committedAnswers++;
      if (answer.status === 'REDEEMED') redeemedAnswers.set(couponId, redeemedAnswers.get(couponId)! + 1);
      answeredTimes.get(couponId)!.add(String(answer.redeemedAt));
    }

    const events = new Map(couponIds.map((id) => [id, 0]));
    const counted = await backend.sql.query<{ coupon_id: string; n: number }>(
      `select payload->>'couponId' as coupon_id, count(*)::int as n from outbox_events
        where tenant_id = $1 and topic = $2 group by 1`,
      [tenantId, COUPON_REDEEMED_TOPIC],
    );
    for (const row of counted.rows) events.set(row.coupon_id, row.n);

    const stored = await backend.sql.query<{ id: string; redeemed_at: Date | null }>(
      'select id, redeemed_at from coupons where tenant_id = $1',
      [tenantId],
    );
    const timeDisagreements = stored.rows
      .filter((row) => {
        const times = answeredTimes.get(row.id)!;
        return times.size !== 1 || !times.has(row.redeemed_at?.toISOString() ?? 'never');
      })
      .map((row) => `${row.id}: answered ${[...answeredTimes.get(row.id)!].join(', ')}, stored ${row.redeemed_at?.toISOString()}`);

    const audit = await backend.sql.query<{ n: number }>(
      "select count(*)::int as n from audit_log where tenant_id = $1 and operation = 'redeemCoupon'",
      [tenantId],
    );
    return {
      requests: total,
      redeemedAnswers,
      events,
      failures,
      timeDisagreements,
      auditRows: audit.rows[0]!.n,
      committedAnswers,
    };
  } finally {
    client.close();
    await server.close();
  }
}

/** The coupons a run redeemed more than once, by its answers or by its outbox events. */
export function doubleRedeems(result: RedeemScenarioResult): string[] {
  return [...result.redeemedAnswers.keys()].filter((id) => result.redeemedAnswers.get(id) !== 1 || result.events.get(id) !== 1);
}

export function describeRedeemRun(label: string, result: RedeemScenarioResult): string {
  const answers = [...result.redeemedAnswers.values()];
  const events = [...result.events.values()];
  return (
    `${label}: ${result.requests} redeems of ${answers.length} coupons released together; ` +
    `REDEEMED answers per coupon [${answers.join(', ')}], coupon.redeemed events per coupon [${events.join(', ')}], ` +
    `${result.timeDisagreements.length} coupons whose answers disagree on redeemedAt, ${result.failures.length} failures, ` +
    `${result.auditRows} audit rows for ${result.committedAnswers} committed answers`
  );
}
