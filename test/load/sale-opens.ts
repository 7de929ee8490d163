import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import type pg from 'pg';
import { CreateCampaignDocument, CreateTenantDocument } from '../generated/graphql.js';
import { LoadClient, type GraphQLReply } from './client.js';
import { replyOutcome } from './scenario.js';
import { checkCouponInvariants, sendIssue, type CouponScenario, type Session } from './scenarios/coupons.js';
import { countBy, summarize } from './stats.js';

/**
 * The bench's row `sale opens: 2,000 members at startsAt`: a campaign created to open a moment
 * later, and an open model of its first second: member i arrives at startsAt + i/2,000 s whatever
 * the server answered the others, sends issueCoupon once, and sends it again after `retryAfterMs`
 * on TRY_AGAIN, as the retry contract asks, until a final answer. What it measures: the first
 * answer's latency from the member's arrival (p50 and p99 over the first second's arrivals), the
 * coupons issued (exactly the budget), NOT_STARTED answers to requests sent at or after the instant
 * (none: the database's clock decides, and the test's clock is the same machine's), and how long
 * after the instant the last member had a final answer.
 */

export const SALE = {
  members: 2_000,
  /** Half the members get a coupon. */
  budgetCoupons: 1_000,
  discountYen: 100,
  slots: 16,
  /** The load generator's connections: arrivals beyond them wait for one, and that wait is in their latency. */
  clients: 512,
  /** From the campaign's creation to its startsAt: the members' timers are set meanwhile. */
  leadMs: 2_000,
} as const;

export interface SaleFigures {
  p50Ms: number;
  p99Ms: number;
  issued: number;
  soldOut: number;
  notStartedAfter: number;
  tryAgain: number;
  /** From the instant to the last member's final answer. */
  drainMs: number;
  violations: string[];
  /** The 1-minute load average when the row ended. */
  loadAverage: number;
}

interface MemberRun {
  firstLatencyMs: number;
  firstOutcome: string;
  final: string;
  notStartedAfter: number;
  tryAgain: number;
  finishedAt: number;
}

function expectOk(reply: GraphQLReply, what: string) {
  if (reply.status !== 200 || reply.body.errors?.length)
    throw new Error(`${what} failed: ${JSON.stringify(reply.body.errors ?? reply.status)}`);
}

/** One member: arrives at `at` (epoch ms), sends until a final answer. */
async function member(client: LoadClient, scenario: CouponScenario, sessions: Session, memberId: string, at: number, opensAt: number) {
  await sleep(Math.max(0, at - Date.now()));
  const run: MemberRun = { firstLatencyMs: 0, firstOutcome: '', final: '', notStartedAfter: 0, tryAgain: 0, finishedAt: 0 };
  for (let attempt = 0; ; attempt++) {
    const sentAt = Date.now();
    const reply = await sendIssue(client, scenario, sessions, { memberId, campaignId: 'sale' });
    const outcome = replyOutcome(reply);
    if (attempt === 0) {
      run.firstLatencyMs = Date.now() - at;
      run.firstOutcome = outcome;
    }
    if (outcome === 'NOT_STARTED' && sentAt >= opensAt) run.notStartedAfter++;
    if (outcome !== 'TRY_AGAIN' && outcome !== 'NOT_STARTED') {
      run.final = outcome;
      run.finishedAt = Date.now();
      return run;
    }
    if (outcome === 'TRY_AGAIN') run.tryAgain++;
    await sleep(Number(reply.body.errors?.[0]?.extensions?.['retryAfterMs'] ?? 100));
  }
}

/** One run of the row against the server at `url` on the database `sql` reads, in a tenant of its own. */
export async function saleOpens(url: string, sql: pg.Pool, sessions: Session, runId: string): Promise<SaleFigures> {
  const client = new LoadClient(url, SALE.clients);
  const tenantId = `sale-${runId}`;
  const scenario: CouponScenario = {
    tenantId,
    capYen: 1_000_000,
    campaigns: [],
    members: [],
    sends: 1,
    expectedIssued: SALE.budgetCoupons,
  };
  try {
    await client.open();
    const tenant = { id: tenantId, name: tenantId, monthlyCapYen: scenario.capYen };
    expectOk(await client.mutation(print(CreateTenantDocument), { input: tenant }, sessions.operator), 'createTenant');
    const now = (await sql.query<{ now: Date }>("select date_trunc('milliseconds', now()) as now")).rows[0]!.now.getTime();
    const opensAt = now + SALE.leadMs;
    const campaign = {
      id: 'sale',
      name: 'sale',
      discountYen: SALE.discountYen,
      budgetYen: SALE.budgetCoupons * SALE.discountYen,
      budgetSlots: SALE.slots,
      startsAt: new Date(opensAt).toISOString(),
    };
    expectOk(await client.mutation(print(CreateCampaignDocument), { input: campaign }, sessions.admin(tenantId)), 'createCampaign');
    const runs = await Promise.all(
      Array.from({ length: SALE.members }, (_, i) =>
        member(client, scenario, sessions, `m${i}`, opensAt + (i * 1000) / SALE.members, opensAt),
      ),
    );
    const finals = countBy(runs, (r) => r.final);
    const invariants = await checkCouponInvariants(sql, scenario, finals['ISSUED'] ?? 0);
    const latency = summarize(runs.map((r) => r.firstLatencyMs));
    const notStartedAfter = runs.reduce((sum, r) => sum + r.notStartedAfter, 0);
    const strays = Object.keys(finals).filter((outcome) => outcome !== 'ISSUED' && outcome !== 'BUDGET_EXCEEDED');
    return {
      p50Ms: latency.p50,
      p99Ms: latency.p99,
      issued: invariants.coupons,
      soldOut: finals['BUDGET_EXCEEDED'] ?? 0,
      notStartedAfter,
      tryAgain: runs.reduce((sum, r) => sum + r.tryAgain, 0),
      drainMs: Math.max(...runs.map((r) => r.finishedAt)) - opensAt,
      violations: [
        ...invariants.violations,
        ...(notStartedAfter ? [`${notStartedAfter} NOT_STARTED answers to requests sent after the instant`] : []),
        ...(strays.length ? [`final answers other than ISSUED and BUDGET_EXCEEDED: ${JSON.stringify(finals)}`] : []),
      ],
      loadAverage: os.loadavg()[0]!,
    };
  } finally {
    client.close();
  }
}

/** The rows' runs as a table: medians, with the worst run's violations and NOT_STARTED answers. */
export function saleTable(rows: { label: string; runs: SaleFigures[] }[]): string {
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const lines = [
    '| row | p50 ms (first second) | p99 ms (first second) | ISSUED (budget) | BUDGET_EXCEEDED | NOT_STARTED after the instant | TRY_AGAIN resent | last final answer ms after the instant | violations | load average (1 min) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const { label, runs } of rows) {
    const m = (figure: (f: SaleFigures) => number, digits = 0) => median(runs.map(figure)).toFixed(digits);
    lines.push(
      `| ${label} | ${m((r) => r.p50Ms, 1)} | ${m((r) => r.p99Ms, 1)} | ${runs.map((r) => r.issued).join(', ')} (${SALE.budgetCoupons}) | ` +
        `${m((r) => r.soldOut)} | ${Math.max(...runs.map((r) => r.notStartedAfter))} | ${m((r) => r.tryAgain)} | ${m((r) => r.drainMs)} | ` +
        `${Math.max(...runs.map((r) => r.violations.length))} | ${runs.map((r) => r.loadAverage.toFixed(1)).join(', ')} |`,
    );
  }
  return lines.join('\n');
}
