import { print } from 'graphql';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { insertCampaign } from '../../../src/features/coupons/campaigns.js';
import type { DB } from '../../../src/db/schema.js';
import { runInTransaction, type TransactionSettings } from '../../../src/db/transaction.js';
import { CreateCampaignDocument, CreateTenantDocument, IssueCouponDocument, type IssueCouponStatus } from '../../generated/graphql.js';
import type { GraphQLReply, LoadClient } from '../client.js';
import { replyOutcome, undecided, violationsOf, type InvariantCheck, type LoadScenario } from '../scenario.js';

interface CampaignSpec {
  id: string;
  discountYen: number;
  budgetYen: number;
  budgetSlots: number;
  /** Budget leases: coupons a server process leases at a time (0 or absent: none). */
  budgetLeaseCoupons?: number;
}

export interface CouponScenario {
  tenantId: string;
  capYen: number;
  campaigns: CampaignSpec[];
  members: string[];
  /** How many times each member sends each campaign's request (double taps, resends). */
  sends: number;
  /** Each member's sends of a campaign follow each other in the order sent, so that a double tap's requests are in flight together. */
  tapsTogether?: boolean;
  /** Exactly this many ISSUED when the invariants hold, if the scenario pins it down. */
  expectedIssued: number | null;
}

/**
 * The reference scenario: cap 2,000 yen; campaigns of 1,000 yen with budgets 100,000, 300,000 and
 * 300,000; 300 members send every campaign twice (1,800 requests). Every member can hold exactly
 * two coupons (the cap) and only the first campaign can run out, so exactly 600 are ISSUED
 * whatever the order.
 */
export function referenceScenario(runId: string, members = 300): CouponScenario {
  const small = Math.round((100_000 * members) / 300);
  const large = Math.round((300_000 * members) / 300);
  return {
    tenantId: `coupons-${runId}`,
    capYen: 2_000,
    // Named by the budget they have at this size (c100k, c300k-a and c300k-b for 300 members).
    campaigns: [
      { id: `c${budgetName(small)}`, discountYen: 1_000, budgetYen: small, budgetSlots: 1 },
      { id: `c${budgetName(large)}-a`, discountYen: 1_000, budgetYen: large, budgetSlots: 1 },
      { id: `c${budgetName(large)}-b`, discountYen: 1_000, budgetYen: large, budgetSlots: 1 },
    ],
    members: Array.from({ length: members }, (_, i) => `member-${i + 1}`),
    sends: 2,
    expectedIssued: 2 * members,
  };
}

/** A budget in yen as a campaign's name says it: 100000 is 100k, 10000000 is 10m, 6667 stays 6667. */
function budgetName(yen: number): string {
  if (yen % 1_000_000 === 0) return `${yen / 1_000_000}m`;
  if (yen % 1_000 === 0) return `${yen / 1_000}k`;
  return String(yen);
}

/** Coupons the hot campaign has beyond half its members: an odd number, so that they divide evenly over no number of slots above one. */
const HOT_EXTRA_COUPONS = 3;

/**
 * One hot first-come campaign: every member asks once for the same coupon and the budget runs out
 * about half-way, so every issue queues on the campaign's budget rows. Its budget divides evenly
 * over no number of slots (half the members plus 3 coupons, and half a coupon's yen no coupon can
 * use): a split that strands a remainder in every slot shows as stranded yen, and exactly
 * floor(budgetYen / discountYen) coupons are issued when none is stranded.
 */
export function hotCampaignScenario(runId: string, members: number, budgetSlots: number): CouponScenario {
  const discountYen = 100;
  const coupons = Math.floor(members / 2) + HOT_EXTRA_COUPONS;
  return {
    tenantId: `hot-${runId}`,
    capYen: 1_000_000,
    campaigns: [{ id: 'hot', discountYen, budgetYen: coupons * discountYen + discountYen / 2, budgetSlots }],
    members: Array.from({ length: members }, (_, i) => `member-${i + 1}`),
    sends: 1,
    expectedIssued: Math.min(members, coupons),
  };
}

export interface Session {
  operator: Record<string, string>;
  /** The platform operator as servers before the operator role knew it (an admin without a tenant): for --baseline checkouts. */
  legacyOperator: Record<string, string>;
  admin: (tenantId: string) => Record<string, string>;
  member: (tenantId: string, memberId: string) => Record<string, string>;
}

/** Dev-mode sessions (x-hasura-* headers as sent); add the action secret for a secured server. */
export function headerSessions(extra: Record<string, string> = {}): Session {
  return {
    operator: { 'x-hasura-role': 'operator', ...extra },
    legacyOperator: { 'x-hasura-role': 'admin', ...extra },
    admin: (tenantId) => ({ 'x-hasura-role': 'admin', 'x-hasura-tenant-id': tenantId, ...extra }),
    member: (tenantId, memberId) => ({
      'x-hasura-role': 'user',
      'x-hasura-tenant-id': tenantId,
      'x-hasura-user-id': memberId,
      ...extra,
    }),
  };
}

function expectOk(reply: GraphQLReply, what: string) {
  if (reply.status !== 200 || reply.body.errors?.length) {
    throw new Error(`${what} failed: ${JSON.stringify(reply.body.errors ?? reply.status)}`);
  }
}

/** Creates the scenario's tenant and campaigns through the API, as an operator and admin would. */
export async function setupCouponScenario(client: LoadClient, scenario: CouponScenario, sessions: Session) {
  const createTenant = (headers: Record<string, string>) =>
    client.mutation(
      print(CreateTenantDocument),
      { input: { id: scenario.tenantId, name: scenario.tenantId, monthlyCapYen: scenario.capYen } },
      headers,
    );
  let created = await createTenant(sessions.operator);
  // An older server (a --baseline checkout) has no operator role and refuses it as unknown.
  if (created.body.errors?.[0]?.extensions?.['code'] === 'FORBIDDEN') created = await createTenant(sessions.legacyOperator);
  expectOk(created, 'createTenant');
  for (const campaign of scenario.campaigns) {
    expectOk(
      await client.mutation(
        print(CreateCampaignDocument),
        { input: { ...campaign, name: `Campaign ${campaign.id}` } },
        sessions.admin(scenario.tenantId),
      ),
      `createCampaign ${campaign.id}`,
    );
  }
}

/**
 * The same tenant and campaigns written straight into the database with the service's own insert:
 * for the bench's rows whose server serves issueCoupon alone (the raw and bare rows).
 */
export async function insertCouponScenario(db: Kysely<DB>, settings: TransactionSettings, scenario: CouponScenario): Promise<void> {
  await runInTransaction(db, settings, { deadline: Date.now() + 10_000 }, async (trx) => {
    await trx.insertInto('tenants').values({ id: scenario.tenantId, name: scenario.tenantId, monthly_cap_yen: scenario.capYen }).execute();
    for (const campaign of scenario.campaigns) await insertCampaign(trx, scenario.tenantId, { ...campaign, name: campaign.id });
  });
}

/** Deterministic shuffle (mulberry32), so a failing run can be repeated with its seed. */
function shuffle<T>(items: T[], seed: number): T[] {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

export interface CouponRequest {
  memberId: string;
  campaignId: string;
}

export function couponRequests(scenario: CouponScenario, seed: number): CouponRequest[] {
  const pairs = scenario.members.flatMap((memberId) => scenario.campaigns.map((campaign) => ({ memberId, campaignId: campaign.id })));
  const sent = (pair: CouponRequest) => Array.from({ length: scenario.sends }, () => pair);
  return scenario.tapsTogether ? shuffle(pairs, seed).flatMap(sent) : shuffle(pairs.flatMap(sent), seed);
}

/** A campaign's budget against its coupons, in SQL. */
export interface CampaignStanding {
  id: string;
  discount_yen: number;
  budget_yen: number;
  coupons_yen: number;
}

/**
 * For a load whose every issue had a key of its own: every answer a key keeps (ISSUED,
 * ALREADY_ISSUED) is stored under its key, and no other; the set-up's own keyed mutations are not
 * counted. One violation when the tenant's kept issueCoupon keys are more or fewer, none otherwise:
 * what shows that a keyed row's keys were sent and claimed.
 *
 * @example const violations = await keptAnswerViolations(sql, tenantId, outcomes)
 */
export async function keptAnswerViolations(
  sql: pg.Pool | pg.Client,
  tenantId: string,
  outcomes: Record<string, number>,
): Promise<string[]> {
  const kept = (outcomes['ISSUED'] ?? 0) + (outcomes['ALREADY_ISSUED'] ?? 0);
  const stored = Number(
    (
      await sql.query<{ n: string }>(
        "select count(*) as n from idempotency_keys where tenant_id = $1 and operation = 'issueCoupon' and response is not null and expires_at > now()",
        [tenantId],
      )
    ).rows[0]!.n,
  );
  return stored === kept ? [] : [`${stored} answers kept under their keys for ${kept} ISSUED and ALREADY_ISSUED answers`];
}

/** The standing of the tenant's campaigns (all, or one), from its coupons. */
export async function campaignStandings(sql: pg.Pool | pg.Client, tenantId: string, campaignId?: string): Promise<CampaignStanding[]> {
  const { rows } = await sql.query<CampaignStanding>(
    `select c.id, c.discount_yen, c.budget_yen,
            coalesce((select sum(k.amount_yen) from coupons k
                       where k.tenant_id = c.tenant_id and k.campaign_id = c.id and k.voided_at is null), 0)::int as coupons_yen
       from campaigns c where c.tenant_id = $1 and ($2::text is null or c.id = $2) order by c.id`,
    [tenantId, campaignId ?? null],
  );
  return rows;
}

/** Yen of a campaign's budget that could still pay for coupons: what a refusal strands (0 for a campaign sold out). */
export const strandedYen = (c: CampaignStanding) =>
  Math.max(0, Math.floor((c.budget_yen - c.coupons_yen) / c.discount_yen)) * c.discount_yen;

/**
 * Every BUDGET_EXCEEDED a run hears, checked in SQL as it comes: a refusal is right only while less
 * than one coupon is left (budgetYen - issuedYen < discountYen). Issued yen only grows, so yen found
 * left after the answer was left when the answer was decided: a refusal that strands yen shows.
 */
export class RefusalProbe {
  private readonly seen: Promise<CampaignStanding | undefined>[] = [];

  constructor(
    private readonly sql: pg.Pool | pg.Client,
    private readonly tenantId: string,
  ) {}

  refused(campaignId: string): void {
    this.seen.push(campaignStandings(this.sql, this.tenantId, campaignId).then((rows) => rows[0]));
  }

  async check(): Promise<InvariantCheck> {
    const seen = (await Promise.all(this.seen)).filter((c): c is CampaignStanding => c !== undefined);
    const stranding = seen.filter((c) => strandedYen(c) > 0);
    return {
      invariant: 'BUDGET_EXCEEDED only when less than one coupon is left',
      counted: `${seen.length} refusals, ${stranding.length} while a coupon's worth was left`,
      violations: stranding.length
        ? [`${stranding.length} BUDGET_EXCEEDED answers while yen was left (e.g. ${stranding[0]!.id}: ${strandedYen(stranding[0]!)} yen)`]
        : [],
    };
  }
}

/** The issue's document as the load sends it. */
export const ISSUE_COUPON_QUERY = print(IssueCouponDocument);

/** How the load sends each issue: to /graphql or as a Hasura action, with or without an Idempotency-Key. */
export interface SendOptions {
  /** A key of its own on every request (each send is a new user action, so outcomes stay those of unkeyed sends). */
  idempotencyKeys?: boolean;
  viaActions?: boolean;
}

export function sendIssue(
  client: LoadClient,
  scenario: CouponScenario,
  sessions: Session,
  request: CouponRequest,
  index = 0,
  options: SendOptions = {},
) {
  const headers = {
    ...sessions.member(scenario.tenantId, request.memberId),
    ...(options.idempotencyKeys ? { 'idempotency-key': `${scenario.tenantId}-${index}` } : {}),
  };
  const variables = { input: { campaignId: request.campaignId } };
  return options.viaActions ? client.action('issueCoupon', variables, headers) : client.graphql(ISSUE_COUPON_QUERY, variables, headers);
}

export interface InvariantReport {
  /** What broke, one line each: every check's violations. */
  violations: string[];
  /** Every invariant with its counts. */
  checks: InvariantCheck[];
  coupons: number;
  outboxEvents: number;
}

/**
 * The scenario's invariants, counted in the database rather than trusted from the replies:
 * every campaign within budget with its counter equal to its coupons, no member over the cap,
 * member-month counters equal to their coupons, one coupon per member per campaign, one outbox
 * event per coupon, and exactly as many coupons as ISSUED replies (and as the scenario expects).
 */
export async function checkCouponInvariants(
  sql: pg.Pool | pg.Client,
  scenario: CouponScenario,
  issuedReplies: number,
  /** Requests whose effect is not known (no answer): each may have issued a coupon. */
  unknown = 0,
): Promise<InvariantReport> {
  const checks: InvariantCheck[] = [];
  const tenant = scenario.tenantId;
  const one = async <T extends pg.QueryResultRow>(text: string) => (await sql.query<T>(text, [tenant])).rows;

  // A schema from before budget leases (the bench's baseline) has no lease table.
  const leases = (await sql.query<{ t: string | null }>("select to_regclass('campaign_budget_leases')::text as t")).rows[0]!.t !== null;
  const leased = leases
    ? '+ coalesce((select sum(issued_yen) from campaign_budget_leases l where l.tenant_id = c.tenant_id and l.campaign_id = c.id), 0)'
    : '';
  const campaigns = await one<{ id: string; budget_yen: number; issued_yen: number; coupons_yen: number }>(`
    select c.id, c.budget_yen,
           (coalesce((select sum(issued_yen) from campaign_budget_slots s where s.tenant_id = c.tenant_id and s.campaign_id = c.id), 0)
            ${leased})::int as issued_yen,
           coalesce((select sum(amount_yen) from coupons k where k.tenant_id = c.tenant_id and k.campaign_id = c.id and k.voided_at is null), 0)::int as coupons_yen
      from campaigns c where c.tenant_id = $1 order by c.id`);
  checks.push({
    invariant: "a campaign's budget is never exceeded",
    counted: campaigns.map((c) => `${c.id} ${c.coupons_yen} of ${c.budget_yen} yen`).join(', '),
    violations: campaigns
      .filter((c) => c.coupons_yen > c.budget_yen)
      .map((c) => `campaign ${c.id}: coupons worth ${c.coupons_yen} yen over a budget of ${c.budget_yen}`),
  });
  checks.push({
    invariant: "a campaign's counter equals its coupons",
    counted: `${campaigns.length} campaigns, ${campaigns.filter((c) => c.issued_yen !== c.coupons_yen).length} differ`,
    violations: campaigns
      .filter((c) => c.issued_yen !== c.coupons_yen)
      .map((c) => `campaign ${c.id}: issuedYen ${c.issued_yen} but coupons worth ${c.coupons_yen}`),
  });

  const months = await one<{ member_id: string; month: string; total: number; cap: number }>(`
    select k.member_id, k.month, sum(k.amount_yen)::int as total, t.monthly_cap_yen as cap
      from coupons k join tenants t on t.id = k.tenant_id
     where k.tenant_id = $1 and k.voided_at is null group by k.member_id, k.month, t.monthly_cap_yen`);
  const overCap = months.filter((m) => m.total > m.cap);
  checks.push({
    invariant: "a member's month stays within the tenant's cap",
    counted: `${months.length} member-months with coupons, ${overCap.length} over the cap of ${scenario.capYen} yen`,
    violations: overCap.length
      ? [`${overCap.length} member-months over the cap (e.g. ${overCap[0]!.member_id}: ${overCap[0]!.total} yen)`]
      : [],
  });

  const [usage] = await one<{ counters: number; differ: number }>(`
    select count(*)::int as counters, count(*) filter (where coalesce(u.used_yen, 0) <> coalesce(f.total, 0))::int as differ from (
      select * from member_monthly_usage where tenant_id = $1) u
      full join (select member_id, month, sum(amount_yen)::int as total from coupons where tenant_id = $1 and voided_at is null group by member_id, month) f
        on f.member_id = u.member_id and f.month = u.month`);
  checks.push({
    invariant: 'member-month counters equal their coupons',
    counted: `${usage!.counters} member-months, ${usage!.differ} differ`,
    violations: usage!.differ > 0 ? [`${usage!.differ} member-month counters differ from their coupons`] : [],
  });

  const [{ coupons }] = (await one<{ coupons: number }>(
    `select count(*)::int as coupons from coupons where tenant_id = $1 and voided_at is null`,
  )) as [{ coupons: number }];
  const duplicates = await one<{ n: number }>(`
    select count(*)::int as n from (select 1 from coupons where tenant_id = $1 and not legacy_duplicate group by campaign_id, member_id having count(*) > 1) d`);
  checks.push({
    invariant: 'one coupon per member per campaign',
    counted: `${coupons} coupons, ${duplicates[0]!.n} member-campaign pairs with two`,
    violations: duplicates[0]!.n > 0 ? [`${duplicates[0]!.n} members hold two coupons of one campaign`] : [],
  });

  const [{ events }] = (await one<{ events: number }>(
    `select count(*)::int as events from outbox_events where tenant_id = $1 and topic = 'coupon.issued'`,
  )) as [{ events: number }];
  checks.push({
    invariant: 'one outbox event per coupon',
    counted: `${events} coupon.issued events for ${coupons} coupons`,
    violations: events === coupons ? [] : [`${events} outbox events for ${coupons} coupons`],
  });
  checks.push({
    invariant: 'one coupon per ISSUED answer',
    counted: `${coupons} coupons for ${issuedReplies} ISSUED answers${unknown > 0 ? ` and ${unknown} requests whose effect is not known` : ''}`,
    violations:
      coupons >= issuedReplies && coupons <= issuedReplies + unknown
        ? []
        : [`${issuedReplies} ISSUED replies${unknown > 0 ? ` (and ${unknown} unknown)` : ''} but ${coupons} coupons in the table`],
  });
  if (scenario.expectedIssued !== null) {
    checks.push({
      invariant: 'exactly as many coupons as the scenario allows',
      counted: `${coupons} coupons, ${scenario.expectedIssued} allowed`,
      violations: coupons === scenario.expectedIssued ? [] : [`${coupons} coupons where exactly ${scenario.expectedIssued} are allowed`],
    });
  }
  return { violations: violationsOf(checks), checks, coupons, outboxEvents: events };
}

/** Every status issueCoupon answers as data, the schema's own (a status added there is a type error here until listed). */
const ISSUE_STATUSES: Record<IssueCouponStatus, true> = {
  ISSUED: true,
  ALREADY_ISSUED: true,
  MONTHLY_CAP: true,
  BUDGET_EXCEEDED: true,
  NOT_STARTED: true,
  ENDED: true,
};

/** Members per block when requests are generated for a duration: each block is a reference scenario's slice. */
const DURATION_BLOCK_MEMBERS = 100;

/**
 * The coupon scenario for the load tool. By default the reference scenario (1,800 requests); with
 * `total` requests, a reference-shaped scenario with enough members; with null (a duration), an
 * endless stream of members, each sending every campaign twice, shuffled a block at a time.
 */
export function couponsScenario(runId: string, total: number | null, budgetSlots = 1): LoadScenario {
  const members = total === null ? 1_000_000 : Math.max(1, Math.ceil(total / 6));
  const scenario = referenceScenario(runId, total === null ? 30_000 : members);
  for (const campaign of scenario.campaigns) campaign.budgetSlots = budgetSlots;
  if (total === null) {
    scenario.members = [];
    scenario.expectedIssued = null;
  } else if (total !== members * 6) {
    scenario.expectedIssued = null;
  }
  return couponLoad(scenario, total);
}

/**
 * Any coupon scenario as a load scenario: `total` requests from its shuffled list, or (null) an
 * endless stream. With a `probe`, every BUDGET_EXCEEDED is checked as it comes (RefusalProbe).
 */
export function couponLoad(scenario: CouponScenario, total: number | null, send: SendOptions = {}, probe?: RefusalProbe): LoadScenario {
  const fixed = total === null ? [] : couponRequests(scenario, 1).slice(0, total);
  const blocks = new Map<number, CouponRequest[]>();
  const streamed = (index: number): CouponRequest => {
    const blockSize = DURATION_BLOCK_MEMBERS * scenario.campaigns.length * scenario.sends;
    const block = Math.floor(index / blockSize);
    if (!blocks.has(block)) {
      blocks.clear();
      const slice = {
        ...scenario,
        members: Array.from({ length: DURATION_BLOCK_MEMBERS }, (_, i) => `member-${block * DURATION_BLOCK_MEMBERS + i + 1}`),
      };
      blocks.set(block, couponRequests(slice, block + 1));
    }
    return blocks.get(block)![index % blockSize]!;
  };
  return {
    name: 'coupons',
    setup: (client, sessions) => setupCouponScenario(client, scenario, sessions),
    request(index, client, sessions) {
      const request = total === null ? streamed(index) : fixed[index];
      if (!request) return null;
      return () =>
        sendIssue(client, scenario, sessions, request, index, send).then((reply) => {
          if (probe && replyOutcome(reply) === 'BUDGET_EXCEEDED') probe.refused(request.campaignId);
          return reply;
        });
    },
    outcomeOf: replyOutcome,
    async check(sql, outcomes) {
      // A request that failed (TRY_AGAIN) was never decided, so the exact ISSUED count no longer applies.
      const failed = Object.keys(outcomes).some((outcome) => !Object.hasOwn(ISSUE_STATUSES, outcome));
      const checked = failed ? { ...scenario, expectedIssued: null } : scenario;
      const checks = (await checkCouponInvariants(sql, checked, outcomes['ISSUED'] ?? 0, undecided(outcomes))).checks;
      return probe ? [...checks, await probe.check()] : checks;
    },
  };
}
