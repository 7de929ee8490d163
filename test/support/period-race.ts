import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import type pg from 'pg';
import { CreateCampaignDocument, CreateTenantDocument } from '../generated/graphql.js';
import { LoadClient, type GraphQLReply } from '../load/client.js';
import { replyOutcome } from '../load/scenario.js';
import { checkCouponInvariants, headerSessions, sendIssue, type CouponScenario } from '../load/scenarios/coupons.js';
import { countBy } from '../load/stats.js';
import { startServerProcess, type ServerProcess } from '../load/target.js';

/**
 * Members racing the instant a campaign opens and the instant another ends, on several server
 * processes of one database. One campaign opens at `opensAt`: its members tap from shortly before
 * it, again after each NOT_STARTED, until a final answer; its budget sells out. Another, open for
 * an hour, ends at `endsAt`: its members send once each, spread evenly across that instant. Every
 * answer is kept with the client's clock around it (the test and the database run on one machine,
 * so on one clock), and every coupon is read in SQL with the time its issuing transaction began on
 * the database's clock (its outbox event's created_at, now() of that transaction).
 */

const DISCOUNT_YEN = 100;
/** Coupons of the campaign that opens: fewer than its members, so that it sells out. */
const OPENING_COUPONS = 64;
const OPENING_MEMBERS = 96;
const CLOSING_MEMBERS = 90;
/** Members start before the instant by up to this much (the campaign that opens), or are spread this far on each side of it (the one that ends). */
const AROUND_MS = 400;
/** A member taps again this long after a NOT_STARTED. */
const TAP_PAUSE_MS = 40;
/** From the campaigns' creation to the first instant: the members' timers are set meanwhile. */
const LEAD_MS = 1_500;
/** From the opening to the end, unless told: time for the opening's members to be answered before the end's come. */
const ENDS_AFTER_OPENING_MS = 1_500;

export interface PeriodRaceShape {
  budgetSlots: number;
  budgetLeaseCoupons: number;
}

export interface Answer {
  campaignId: string;
  memberId: string;
  /** The client's clock: epoch ms when the request was sent and when its answer came. */
  sentAt: number;
  receivedAt: number;
  outcome: string;
}

export interface PeriodRaceResult {
  violations: string[];
  opening: Record<string, number>;
  closing: Record<string, number>;
  /** The instants, as the database stores them. */
  opensAt: string;
  endsAt: string;
}

/** Server processes of `strategy` (BENCH_STRATEGY of test/load/bench-server.ts) on `databaseUrl`, one per env of `each`. */
export async function startRaceServers(databaseUrl: string, each: Record<string, string>[]): Promise<ServerProcess[]> {
  return Promise.all(
    each.map((env) => startServerProcess('test/load/bench-server.ts', { DATABASE_URL: databaseUrl, RUN_WORKERS: 'false', ...env })),
  );
}

/** When the client's clock reaches `at` (epoch ms). */
const until = (at: number) => sleep(Math.max(0, at - Date.now()));

async function timedIssue(client: LoadClient, scenario: CouponScenario, campaignId: string, memberId: string): Promise<Answer> {
  const sentAt = Date.now();
  const reply = await sendIssue(client, scenario, headerSessions(), { memberId, campaignId });
  return { campaignId, memberId, sentAt, receivedAt: Date.now(), outcome: replyOutcome(reply) };
}

/** Every coupon of the tenant with its issuedAt and the database's time its transaction began, against its campaign's period. */
async function couponViolations(sql: pg.Pool, tenantId: string): Promise<string[]> {
  const { rows } = await sql.query<{ campaign_id: string; early: number; late: number; stamped_off: number }>(
    `select k.campaign_id,
            count(*) filter (where k.issued_at < c.starts_at or e.created_at < c.starts_at)::int as early,
            count(*) filter (where k.issued_at >= c.ends_at or e.created_at >= c.ends_at)::int as late,
            -- issuedAt is the instant the statement judged the period at: the database's, to the millisecond.
            count(*) filter (where k.issued_at <> date_trunc('milliseconds', e.created_at))::int as stamped_off
       from coupons k
       join campaigns c on c.tenant_id = k.tenant_id and c.id = k.campaign_id
       left join outbox_events e on e.tenant_id = k.tenant_id and e.topic = 'coupon.issued' and e.payload->>'id' = k.id::text
      where k.tenant_id = $1
      group by k.campaign_id`,
    [tenantId],
  );
  return rows.flatMap((r) => [
    ...(r.early ? [`${r.campaign_id}: ${r.early} coupons issued before startsAt on the database's clock`] : []),
    ...(r.late ? [`${r.campaign_id}: ${r.late} coupons issued at or after endsAt on the database's clock`] : []),
    ...(r.stamped_off ? [`${r.campaign_id}: ${r.stamped_off} coupons whose issuedAt is not their transaction's time`] : []),
  ]);
}

/** The answers against the client's clock around them: nothing refused as not started once sent after the instant, nothing issued before it was answered. */
function answerViolations(answers: Answer[], opensAt: number, endsAt: number): string[] {
  const count = (what: string, match: (a: Answer) => boolean) => {
    const n = answers.filter(match).length;
    return n ? [`${n} ${what}`] : [];
  };
  return [
    ...count('NOT_STARTED answers to requests sent at or after startsAt', (a) => a.outcome === 'NOT_STARTED' && a.sentAt >= opensAt),
    ...count(
      'ISSUED answers received before startsAt',
      (a) => a.campaignId === 'opens' && a.outcome === 'ISSUED' && a.receivedAt < opensAt,
    ),
    ...count('ENDED answers received before endsAt', (a) => a.outcome === 'ENDED' && a.receivedAt < endsAt),
    ...count(
      'ISSUED answers to requests sent at or after endsAt',
      (a) => a.campaignId === 'closes' && a.outcome === 'ISSUED' && a.sentAt >= endsAt,
    ),
    ...count('answers other than a status', (a) => !['ISSUED', 'BUDGET_EXCEEDED', 'NOT_STARTED', 'ENDED'].includes(a.outcome)),
  ];
}

function expectOk(reply: GraphQLReply, what: string) {
  if (reply.status !== 200 || reply.body.errors?.length)
    throw new Error(`${what} failed: ${JSON.stringify(reply.body.errors ?? reply.status)}`);
}

/** Creates the tenant and the two campaigns through the first server; the instants come from the database's clock. */
async function setUp(client: LoadClient, sql: pg.Pool, tenantId: string, shape: PeriodRaceShape, gapMs: number) {
  const sessions = headerSessions();
  const tenant = { id: tenantId, name: tenantId, monthlyCapYen: 1_000_000_000 };
  expectOk(await client.mutation(print(CreateTenantDocument), { input: tenant }, sessions.operator), 'createTenant');
  const now = (await sql.query<{ now: Date }>("select date_trunc('milliseconds', now()) as now")).rows[0]!.now.getTime();
  const opensAt = now + LEAD_MS;
  const endsAt = opensAt + gapMs;
  const admin = sessions.admin(tenantId);
  const create = async (input: Record<string, unknown>) =>
    expectOk(
      await client.mutation(print(CreateCampaignDocument), { input: { discountYen: DISCOUNT_YEN, ...shape, ...input } }, admin),
      `createCampaign ${String(input['id'])}`,
    );
  await create({
    id: 'opens',
    name: 'opens',
    budgetYen: OPENING_COUPONS * DISCOUNT_YEN + DISCOUNT_YEN / 2,
    startsAt: new Date(opensAt).toISOString(),
  });
  await create({
    id: 'closes',
    name: 'closes',
    budgetYen: 100 * CLOSING_MEMBERS * DISCOUNT_YEN,
    startsAt: new Date(now - 3_600_000).toISOString(),
    endsAt: new Date(endsAt).toISOString(),
  });
  return { opensAt, endsAt };
}

/** Runs the race on `servers` (already started), in a tenant of its own. */
export async function runPeriodRace(
  servers: ServerProcess[],
  sql: pg.Pool,
  tenantId: string,
  shape: PeriodRaceShape,
  gapMs = ENDS_AFTER_OPENING_MS,
): Promise<PeriodRaceResult> {
  const clients = servers.map((server) => new LoadClient(server.url, OPENING_MEMBERS + CLOSING_MEMBERS));
  try {
    await Promise.all(clients.map((client) => client.open()));
    const { opensAt, endsAt } = await setUp(clients[0]!, sql, tenantId, shape, gapMs);
    const scenario: CouponScenario = { tenantId, capYen: 1_000_000_000, campaigns: [], members: [], sends: 1, expectedIssued: null };
    const answers: Answer[] = [];
    // A member taps, going round the servers, until the campaign answers something else than NOT_STARTED.
    const tapper = async (i: number) => {
      await until(opensAt - AROUND_MS + (i * AROUND_MS) / OPENING_MEMBERS / 2);
      for (let tap = 0; ; tap++) {
        const answer = await timedIssue(clients[(i + tap) % clients.length]!, scenario, 'opens', `opening-${i}`);
        answers.push(answer);
        if (answer.outcome !== 'NOT_STARTED') return;
        await sleep(TAP_PAUSE_MS);
      }
    };
    const closer = async (i: number) => {
      await until(endsAt - AROUND_MS + (i * 2 * AROUND_MS) / CLOSING_MEMBERS);
      answers.push(await timedIssue(clients[i % clients.length]!, scenario, 'closes', `closing-${i}`));
    };
    await Promise.all([
      ...Array.from({ length: OPENING_MEMBERS }, (_, i) => tapper(i)),
      ...Array.from({ length: CLOSING_MEMBERS }, (_, i) => closer(i)),
    ]);
    const final = answers.filter((a) => a.outcome !== 'NOT_STARTED');
    const issued = final.filter((a) => a.outcome === 'ISSUED').length;
    const invariants = await checkCouponInvariants(sql, scenario, issued);
    const opening = countBy(
      answers.filter((a) => a.campaignId === 'opens'),
      (a) => a.outcome,
    );
    const soldOut =
      opening['ISSUED'] === OPENING_COUPONS && opening['BUDGET_EXCEEDED'] === OPENING_MEMBERS - OPENING_COUPONS
        ? []
        : [`the campaign that opened answered ${JSON.stringify(opening)} where ${OPENING_COUPONS} ISSUED are due`];
    return {
      violations: [
        ...(await couponViolations(sql, tenantId)),
        ...answerViolations(answers, opensAt, endsAt),
        ...invariants.violations,
        ...soldOut,
      ],
      opening,
      closing: countBy(
        answers.filter((a) => a.campaignId === 'closes'),
        (a) => a.outcome,
      ),
      opensAt: new Date(opensAt).toISOString(),
      endsAt: new Date(endsAt).toISOString(),
    };
  } finally {
    for (const client of clients) client.close();
  }
}
