import fc from 'fast-check';
import { print } from 'graphql';
import type pg from 'pg';
import { ChangeCampaignBudgetDocument, CreateCampaignDocument } from '../generated/graphql.js';
import { LoadClient, runReleasedTogether, type GraphQLReply } from '../load/client.js';
import { checkCouponInvariants, headerSessions, sendIssue, type CouponScenario, type Session } from '../load/scenarios/coupons.js';
import { countBy } from '../load/stats.js';
import { resendingTryAgain } from './coupon-run.js';
import { createTenant, serveOverHttp, type TestBackend } from './harness.js';
import { sellOutCases, type CampaignShape } from './sell-out.js';

/**
 * A campaign's budget raised and lowered by its tenant's admin while members issue from it, on
 * several backends of one database (each a lease holder of its own), then a second wave after a
 * last change that must sell the campaign out exactly at that figure. Counted in SQL: during the
 * first wave by a watcher that reads the campaign in one snapshot after another, afterwards by the
 * coupon invariants and by every change's answer against what the tables say.
 */

export interface BudgetRaceCampaign {
  discountYen: number;
  /** The budget it is created with. */
  budgetYen: number;
  budgetSlots: number;
  budgetLeaseCoupons: number;
}

export interface BudgetRacePlan {
  /** Members of the first wave, each asking once. */
  members: number;
  /** The budgets the admin sets during the first wave, each sent before the issue of the member at `after` (0 to members). */
  changes: { after: number; budgetYen: number }[];
  /** Coupons (and yen that pays for none) the last change leaves beyond what members hold before the second wave. */
  secondWave: { coupons: number; remainderYen: number; extraMembers: number };
  /** Requests in flight at once. */
  concurrency: number;
}

export interface BudgetRaceResult {
  violations: string[];
  /** What the first wave's issues and changes answered. */
  firstWave: Record<string, number>;
  changes: Record<string, number>;
  secondWave: Record<string, number>;
  /** Snapshots the watcher read during the first wave. */
  snapshots: number;
  coupons: number;
}

const CAMPAIGN = 'hot';

/** The coupon's value in RACE_PLAN's figures. */
export const RACE_DISCOUNT_YEN = 100;

/** Raised, lowered (below what members hold, likely, at 90), raised, lowered, raised: the first wave's changes. */
export const RACE_PLAN: BudgetRacePlan = {
  members: 300,
  changes: [
    { after: 30, budgetYen: 200 * RACE_DISCOUNT_YEN },
    { after: 90, budgetYen: 60 * RACE_DISCOUNT_YEN + 50 },
    { after: 150, budgetYen: 150 * RACE_DISCOUNT_YEN + 30 },
    { after: 200, budgetYen: 120 * RACE_DISCOUNT_YEN },
    { after: 260, budgetYen: 260 * RACE_DISCOUNT_YEN + 70 },
  ],
  secondWave: { coupons: 37, remainderYen: 50, extraMembers: 20 },
  concurrency: 32,
};

interface ChangeAnswer {
  status: string;
  requested: number;
  campaign?: { budgetYen: number; issuedYen: number };
}

/** Reads the campaign in one statement after another until stopped: its budget, its slots' budgets and its coupons must agree in every snapshot. */
function watchCampaign(sql: pg.Pool, tenantId: string) {
  let stopped = false;
  const violations: string[] = [];
  let snapshots = 0;
  const done = (async () => {
    while (!stopped) {
      const { rows } = await sql.query<{ budget_yen: number; slots_yen: number; coupons_yen: number }>(
        `select c.budget_yen,
                (select coalesce(sum(budget_yen), 0)::int from campaign_budget_slots s where s.tenant_id = c.tenant_id and s.campaign_id = c.id) as slots_yen,
                (select coalesce(sum(amount_yen), 0)::int from coupons k where k.tenant_id = c.tenant_id and k.campaign_id = c.id) as coupons_yen
           from campaigns c where c.tenant_id = $1 and c.id = $2`,
        [tenantId, CAMPAIGN],
      );
      const row = rows[0];
      snapshots++;
      if (row && row.coupons_yen > row.budget_yen)
        violations.push(`a snapshot held coupons of ${row.coupons_yen} yen over a budget of ${row.budget_yen}`);
      if (row && row.slots_yen !== row.budget_yen)
        violations.push(`a snapshot's slots added up to ${row.slots_yen} yen for a budget of ${row.budget_yen}`);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return { violations: [...new Set(violations)], snapshots };
    },
  };
}

async function sendChange(client: LoadClient, sessions: Session, tenantId: string, budgetYen: number): Promise<ChangeAnswer> {
  const replies: GraphQLReply[] = [];
  const outcome = await resendingTryAgain(async () => {
    const reply = await client.graphql(
      print(ChangeCampaignBudgetDocument),
      { input: { campaignId: CAMPAIGN, budgetYen } },
      sessions.admin(tenantId),
    );
    replies.push(reply);
    return reply;
  }, {});
  const payload = replies.at(-1)?.body.data?.['changeCampaignBudget'] as ChangeAnswer | undefined;
  return { status: outcome, requested: budgetYen, ...(payload?.campaign ? { campaign: payload.campaign } : {}) };
}

/** Each change's answer against the numbers it carries: CHANGED to the figure asked, never below what was issued; BELOW_ISSUED only below it. */
function changeViolations(answers: ChangeAnswer[]): string[] {
  return answers.flatMap((a) => {
    if (a.status === 'CHANGED' && a.campaign && a.campaign.budgetYen === a.requested && a.campaign.issuedYen <= a.requested) return [];
    if (a.status === 'BELOW_ISSUED' && a.campaign && a.campaign.issuedYen > a.requested) return [];
    return [`a change to ${a.requested} yen answered ${a.status} with ${JSON.stringify(a.campaign ?? null)}`];
  });
}

/** What the tables say of the changes and the leases: an audit row and an event per CHANGED answer, the budget row's leased yen equal to the leases'. */
async function bookkeepingViolations(sql: pg.Pool, tenantId: string, changed: number): Promise<string[]> {
  const { rows } = await sql.query<{ audit: number; events: number; row_leased: number; leases: number }>(
    `select (select count(*)::int from audit_log where tenant_id = $1 and operation = 'changeCampaignBudget') as audit,
            (select count(*)::int from outbox_events where tenant_id = $1 and topic = 'campaign.budget_changed') as events,
            (select coalesce(sum(leased_yen), 0)::int from campaign_budget_slots where tenant_id = $1) as row_leased,
            (select coalesce(sum(budget_yen), 0)::int from campaign_budget_leases where tenant_id = $1) as leases`,
    [tenantId],
  );
  const r = rows[0]!;
  return [
    ...(r.audit === changed ? [] : [`${r.audit} audit rows for ${changed} CHANGED answers`]),
    ...(r.events === changed ? [] : [`${r.events} campaign.budget_changed events for ${changed} CHANGED answers`]),
    ...(r.row_leased === r.leases ? [] : [`the budget row's leased yen ${r.row_leased} against the leases' ${r.leases}`]),
  ];
}

/** Runs `plan` on a campaign of its own in tenant `tenantId`, spread over `backends`. */
export async function runBudgetRace(
  backends: TestBackend[],
  tenantId: string,
  campaign: BudgetRaceCampaign,
  plan: BudgetRacePlan,
): Promise<BudgetRaceResult> {
  const served = await Promise.all(backends.map((backend) => serveOverHttp(backend)));
  const clients = served.map(({ url }) => new LoadClient(url, plan.concurrency));
  const sessions = headerSessions();
  const sql = backends[0]!.sql;
  const scenario = (members: string[], expectedIssued: number | null): CouponScenario => ({
    tenantId,
    capYen: 1_000_000_000,
    campaigns: [{ id: CAMPAIGN, ...campaign }],
    members,
    sends: 1,
    expectedIssued,
  });
  try {
    await createTenant(backends[0]!, tenantId, 1_000_000_000);
    await clients[0]!.mutation(
      print(CreateCampaignDocument),
      { input: { id: CAMPAIGN, name: CAMPAIGN, ...campaign } },
      sessions.admin(tenantId),
    );
    for (const client of clients) await client.open();
    const clientOf = (i: number) => clients[i % clients.length]!;
    const issue = (memberId: string, i: number, members: string[]) => () =>
      resendingTryAgain(() => sendIssue(clientOf(i), scenario(members, null), sessions, { memberId, campaignId: CAMPAIGN }), {});

    const first = Array.from({ length: plan.members }, (_, i) => `w1-${i}`);
    const changeAnswers: ChangeAnswer[] = [];
    const tasks: (() => Promise<string>)[] = [];
    for (let i = 0; i <= plan.members; i++) {
      for (const change of plan.changes.filter((c) => c.after === i)) {
        tasks.push(async () => {
          const answer = await sendChange(clientOf(tasks.length), sessions, tenantId, change.budgetYen);
          changeAnswers.push(answer);
          return `change ${answer.status}`;
        });
      }
      if (i < plan.members) tasks.push(issue(first[i]!, i, first));
    }
    const watcher = watchCampaign(sql, tenantId);
    const firstOutcomes = await runReleasedTogether(tasks, plan.concurrency).finally(() => watcher.stop());
    const watched = await watcher.stop();

    const held = (await sql.query<{ n: number }>('select count(*)::int as n from coupons where tenant_id = $1', [tenantId])).rows[0]!.n;
    const finalYen = (held + plan.secondWave.coupons) * campaign.discountYen + plan.secondWave.remainderYen;
    const last = await sendChange(clients[0]!, sessions, tenantId, finalYen);
    changeAnswers.push(last);
    const second = Array.from({ length: plan.secondWave.coupons + plan.secondWave.extraMembers }, (_, i) => `w2-${i}`);
    const secondOutcomes = await runReleasedTogether(
      second.map((memberId, i) => issue(memberId, i, second)),
      plan.concurrency,
    );
    const secondCounts = countBy(secondOutcomes, (o) => o);
    const all = [...first, ...second];
    const expected = held + plan.secondWave.coupons;
    const issuedAnswers = countBy(firstOutcomes, (o) => o)['ISSUED'] ?? 0;
    const invariants = await checkCouponInvariants(sql, scenario(all, expected), issuedAnswers + (secondCounts['ISSUED'] ?? 0));
    const changed = changeAnswers.filter((a) => a.status === 'CHANGED').length;
    const exact =
      last.status === 'CHANGED' &&
      secondCounts['ISSUED'] === plan.secondWave.coupons &&
      secondCounts['BUDGET_EXCEEDED'] === plan.secondWave.extraMembers
        ? []
        : [`second wave at ${finalYen} yen (last change ${last.status}) answered ${JSON.stringify(secondCounts)}`];
    const strays = firstOutcomes.filter((o) => !['ISSUED', 'BUDGET_EXCEEDED', 'change CHANGED', 'change BELOW_ISSUED'].includes(o));
    return {
      violations: [
        ...watched.violations,
        ...invariants.violations,
        ...changeViolations(changeAnswers),
        ...(await bookkeepingViolations(sql, tenantId, changed)),
        ...exact,
        ...(strays.length ? [`first-wave answers other than a status: ${JSON.stringify(countBy(strays, (o) => o))}`] : []),
      ],
      firstWave: countBy(firstOutcomes, (o) => o),
      changes: countBy(changeAnswers, (a) => a.status),
      secondWave: secondCounts,
      snapshots: watched.snapshots,
      coupons: invariants.coupons,
    };
  } finally {
    for (const client of clients) client.close();
    for (const { server } of served) await server.close();
  }
}

/**
 * The sell-out property's campaigns (sell-out.ts: any discount, budget, slots up to 64, leases),
 * each with one to four budget changes at random points of its first wave (to 1 to 60 coupons and
 * yen that pays for none), then a second wave of a few coupons beyond what members hold.
 */
export function budgetChangeCases(shapes?: CampaignShape[]): fc.Arbitrary<{ campaign: BudgetRaceCampaign; plan: BudgetRacePlan }> {
  const change = fc.record({
    at: fc.double({ min: 0, max: 1, noNaN: true }),
    coupons: fc.integer({ min: 1, max: 60 }),
    remainderShare: fc.double({ min: 0, max: 0.999, noNaN: true }),
  });
  const secondWave = fc.record({ coupons: fc.integer({ min: 1, max: 12 }), extraMembers: fc.integer({ min: 1, max: 8 }) });
  return fc.tuple(sellOutCases(shapes), fc.array(change, { minLength: 1, maxLength: 4 }), secondWave).map(([c, changes, second]) => {
    const members = c.coupons + c.extraMembers;
    const { discountYen, budgetSlots, budgetLeaseCoupons } = c;
    return {
      campaign: { discountYen, budgetYen: c.coupons * discountYen + c.remainderYen, budgetSlots, budgetLeaseCoupons },
      plan: {
        members,
        changes: changes.map((p) => ({
          after: Math.floor(p.at * members),
          budgetYen: p.coupons * discountYen + Math.floor(p.remainderShare * discountYen),
        })),
        secondWave: { coupons: second.coupons, remainderYen: c.remainderYen, extraMembers: second.extraMembers },
        concurrency: 16,
      },
    };
  });
}
