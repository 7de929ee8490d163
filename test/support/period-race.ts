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
 * it, again after each NOT_STARTED, until a final answer; its budget sells out. Once they all have
 * theirs, another campaign, open for an hour, is made to end a moment later: its members send once
 * each, spread evenly across that instant (the two phases one after the other, so that a busy
 * machine's slow answers to the first cannot push the second past its instant). Every
 * answer is kept with the client's clock around it (the test and the database run on one machine,
 * so on one clock), and every coupon is read in SQL with the time its issuing transaction began on
 * the database's clock (its outbox event's created_at, now() of that transaction).
 */

const DISCOUNT_YEN = 100;
/** Coupons of the campaign that opens: fewer than its members, so that it sells out. */
const OPENING_COUPONS = 64;
const OPENING_MEMBERS = 96;
const CLOSING_MEMBERS = 90;
/**
 * Members start before the instant by up to this much (the campaign that opens), or are spread this
 * far on each side of it (the one that ends): on a machine whose cores are busy an answer takes
 * hundreds of milliseconds, and the race must still straddle the instant.
 */
const AROUND_MS = 1_000;
/** A member taps again this long after a NOT_STARTED. */
const TAP_PAUSE_MS = 40;
/** From a campaign's creation to its instant, beyond AROUND_MS: the members' timers are set meanwhile. */
const LEAD_MS = 500;

export interface PeriodRaceShape {
  budgetSlots: number;
  budgetLeaseCoupons: number;
}

interface Answer {
  campaignId: string;
  memberId: string;
  /** The client's clock: epoch ms when the request was sent and when its answer came. */
  sentAt: number;
  receivedAt: number;
  outcome: string;
  /** A TRY_AGAIN's wait before the resend the retry contract asks for. */
  retryAfterMs: number;
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
  const retryAfterMs = Number(reply.body.errors?.[0]?.extensions?.['retryAfterMs'] ?? 100);
  return { campaignId, memberId, sentAt, receivedAt: Date.now(), outcome: replyOutcome(reply), retryAfterMs };
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
    ...count(
      'answers other than a status or TRY_AGAIN',
      (a) => !['ISSUED', 'BUDGET_EXCEEDED', 'NOT_STARTED', 'ENDED', 'TRY_AGAIN'].includes(a.outcome),
    ),
  ];
}

function expectOk(reply: GraphQLReply, what: string) {
  if (reply.status !== 200 || reply.body.errors?.length)
    throw new Error(`${what} failed: ${JSON.stringify(reply.body.errors ?? reply.status)}`);
}

/** Creates a campaign through `client` as the tenant's admin. */
async function createCampaign(client: LoadClient, tenantId: string, input: Record<string, unknown>) {
  const admin = headerSessions().admin(tenantId);
  expectOk(
    await client.mutation(print(CreateCampaignDocument), { input: { discountYen: DISCOUNT_YEN, ...input } }, admin),
    `createCampaign ${String(input['id'])}`,
  );
}

/** An instant a moment ahead on the database's clock (epoch ms): the campaign's start or end. */
async function instantAhead(sql: pg.Pool): Promise<number> {
  const now = (await sql.query<{ now: Date }>("select date_trunc('milliseconds', now()) as now")).rows[0]!.now.getTime();
  return now + LEAD_MS + AROUND_MS;
}

/** Runs the race on `servers` (already started), in a tenant of its own. */
export async function runPeriodRace(
  servers: ServerProcess[],
  sql: pg.Pool,
  tenantId: string,
  shape: PeriodRaceShape,
): Promise<PeriodRaceResult> {
  const clients = servers.map((server) => new LoadClient(server.url, OPENING_MEMBERS + CLOSING_MEMBERS));
  try {
    await Promise.all(clients.map((client) => client.open()));
    const tenant = { id: tenantId, name: tenantId, monthlyCapYen: 1_000_000_000 };
    expectOk(await clients[0]!.mutation(print(CreateTenantDocument), { input: tenant }, headerSessions().operator), 'createTenant');
    const scenario: CouponScenario = { tenantId, capYen: 1_000_000_000, campaigns: [], members: [], sends: 1, expectedIssued: null };
    const answers: Answer[] = [];
    // A member taps, going round the servers, until the campaign answers something else than NOT_STARTED;
    // a TRY_AGAIN (a busy machine's shed or timeout, nothing written) is sent again after its Retry-After.
    const member = async (i: number, campaignId: string, memberId: string, tapping: boolean) => {
      for (let tap = 0; ; tap++) {
        const answer = await timedIssue(clients[(i + tap) % clients.length]!, scenario, campaignId, memberId);
        answers.push(answer);
        if (answer.outcome === 'TRY_AGAIN') await sleep(answer.retryAfterMs);
        else if (tapping && answer.outcome === 'NOT_STARTED') await sleep(TAP_PAUSE_MS);
        else return;
      }
    };
    const opensAt = await instantAhead(sql);
    const opening = { id: 'opens', name: 'opens', budgetYen: OPENING_COUPONS * DISCOUNT_YEN + DISCOUNT_YEN / 2, ...shape };
    await createCampaign(clients[0]!, tenantId, { ...opening, startsAt: new Date(opensAt).toISOString() });
    await Promise.all(
      Array.from({ length: OPENING_MEMBERS }, async (_, i) => {
        await until(opensAt - AROUND_MS + (i * AROUND_MS) / OPENING_MEMBERS / 2);
        await member(i, 'opens', `opening-${i}`, true);
      }),
    );
    const endsAt = await instantAhead(sql);
    await createCampaign(clients[0]!, tenantId, {
      id: 'closes',
      name: 'closes',
      budgetYen: 100 * CLOSING_MEMBERS * DISCOUNT_YEN,
      ...shape,
      startsAt: new Date(endsAt - 3_600_000).toISOString(),
      endsAt: new Date(endsAt).toISOString(),
    });
    await Promise.all(
      Array.from({ length: CLOSING_MEMBERS }, async (_, i) => {
        await until(endsAt - AROUND_MS + (i * 2 * AROUND_MS) / CLOSING_MEMBERS);
        await member(i, 'closes', `closing-${i}`, false);
      }),
    );
    const final = answers.filter((a) => a.outcome !== 'NOT_STARTED');
    const issued = final.filter((a) => a.outcome === 'ISSUED').length;
    const invariants = await checkCouponInvariants(sql, scenario, issued);
    const opened = countBy(
      answers.filter((a) => a.campaignId === 'opens'),
      (a) => a.outcome,
    );
    const soldOut =
      opened['ISSUED'] === OPENING_COUPONS && opened['BUDGET_EXCEEDED'] === OPENING_MEMBERS - OPENING_COUPONS
        ? []
        : [`the campaign that opened answered ${JSON.stringify(opened)} where ${OPENING_COUPONS} ISSUED are due`];
    return {
      violations: [
        ...(await couponViolations(sql, tenantId)),
        ...answerViolations(answers, opensAt, endsAt),
        ...invariants.violations,
        ...soldOut,
      ],
      opening: opened,
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
