import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CreateCampaignDocument,
  IssueCouponDocument,
  type CouponStatus,
  type IssueCouponMutation,
  type IssueCouponMutationVariables,
} from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  gqlOk,
  type TestBackend,
  type TestBackendOptions,
} from './support/harness.js';
import { waitFor, waitForLockWaiter } from './support/wait.js';
import { fairAdmission, type Admission } from '../src/services/admission.js';
import { tryAgain } from '../src/core/errors.js';
import { SIDE_BY_SIDE, type IssueCoalescer } from '../src/features/coupons/coalescer.js';

// The coalescer over real HTTP: issues of a tenant that arrive while SIDE_BY_SIDE statements of it
// are in flight run as one statement when the first of those ends. A transaction of the test's own
// holds the row the statements in flight need, so that the others are seen queued before they are let go.

const TENANT = 'batched';

/** A counter's value in a Prometheus text page (a counter without labels). */
function counterValue(page: string, name: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`${name} is not on the page`);
  return Number(line.slice(name.length + 1));
}
type IssuePayload = IssueCouponMutation['issueCoupon'];
/** IssueCouponMutation with the coupon's status. */
type IssueWithStatus = {
  issueCoupon: Omit<IssuePayload, 'coupon'> & { coupon?: (NonNullable<IssuePayload['coupon']> & { status: CouponStatus }) | null };
};
/** Two members tap twice each, one once. */
const TAPS = ['tap-a', 'tap-b', 'tap-a', 'tap-c', 'tap-b'];
const CAP = 2_000;

/** A campaign of one budget row whose shape the process has learned (only a known shape is batched): its first coupon is issued. */
async function learnedCampaign(backend: TestBackend, id: string) {
  await gqlOk(
    backend.app.fetch,
    CreateCampaignDocument,
    { input: { id, name: id, discountYen: 500, budgetYen: 100_000, budgetSlots: 1 } },
    asTenantAdmin(TENANT),
  );
  const first = await gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: id } }, asUser(TENANT, `${id}-learner`));
  expect(first.body.data?.issueCoupon.status).toBe('ISSUED');
}

/**
 * Fills the tenant's line: SIDE_BY_SIDE issues on `campaign` (whose budget row the test holds), each
 * run at once, alone, as its line has room, and each waiting for the row; resolves once all are in
 * flight, so that the next issue of the tenant waits for a batch. Their replies come once the row is let go.
 */
async function fillLine<T>(coalescer: IssueCoalescer, send: (member: string) => Promise<T>, campaign: string): Promise<Promise<T>[]> {
  const replies = Array.from({ length: SIDE_BY_SIDE }, (_, i) => send(`${campaign}-first-${i}`));
  await waitFor(() => (coalescer.inFlight(TENANT) === SIDE_BY_SIDE ? true : undefined), `${SIDE_BY_SIDE} issues in flight`);
  return replies;
}

/**
 * A backend with issue batching on (and `options`), the test tenant, and a client of the test's own
 * that holds rows while issues queue, for the describe it is called in.
 */
function batchingBackend(options: TestBackendOptions = {}) {
  const setup = {} as { backend: TestBackend; holder: pg.Client };
  beforeAll(async () => {
    setup.backend = await createTestBackend({ ...options, env: { COUPON_ISSUE_BATCH_MAX: '32', ...options.env } });
    await createTenant(setup.backend, TENANT, CAP);
    setup.holder = new pg.Client({ connectionString: setup.backend.databaseUrl });
    await setup.holder.connect();
  });
  afterAll(async () => {
    await setup.holder.end();
    await setup.backend.close();
  });
  return setup;
}

describe('issueCoupon batching (COUPON_ISSUE_BATCH_MAX)', () => {
  const setup = batchingBackend();

  const createCampaign = (id: string, budgetYen: number, budgetSlots = 1) =>
    gqlOk(
      setup.backend.app.fetch,
      CreateCampaignDocument,
      { input: { id, name: id, discountYen: 500, budgetYen, budgetSlots } },
      asTenantAdmin(TENANT),
    );
  const issue = (campaignId: string, member: string, key?: string) =>
    gql(
      setup.backend.app.fetch,
      IssueCouponDocument,
      { input: { campaignId } },
      { ...asUser(TENANT, member), ...(key ? { 'idempotency-key': key } : {}) },
    );
  /** issueCoupon with the coupon's status selected too, as a Hasura action's answer selects it. */
  const issueWithStatus = (campaignId: string, member: string, key?: string) =>
    gql<IssueWithStatus, IssueCouponMutationVariables>(
      setup.backend.app.fetch,
      `mutation ($input: IssueCouponInput!) {
        issueCoupon(input: $input) { status coupon { id campaignId memberId month amountYen issuedAt expiresAt status } }
      }`,
      { input: { campaignId } },
      { ...asUser(TENANT, member), ...(key ? { 'idempotency-key': key } : {}) },
    );
  const statusOf = (reply: Awaited<ReturnType<typeof issue>>) => reply.body.data?.issueCoupon.status ?? JSON.stringify(reply.body.errors);
  const count = async (table: string, where: string, params: unknown[]) =>
    Number((await setup.backend.sql.query(`select count(*) as n from ${table} where ${where}`, params)).rows[0].n);
  const coalescer = () => setup.backend.services.issueCoalescer;

  /**
   * Fills the line with issues on the first campaign (their statements then wait on what `hold`
   * locked), then sends `rest` (on `campaign` or several), and resolves once all of `rest` are
   * queued behind them.
   */
  async function queuedBehind<Reply>(campaign: string | string[], hold: string, rest: (() => Promise<Reply>)[]) {
    const campaigns = typeof campaign === 'string' ? [campaign] : campaign;
    await setup.holder.query('begin');
    await setup.holder.query(hold);
    const firstReplies = await fillLine(coalescer(), (member) => issue(campaigns[0]!, member), campaigns[0]!);
    await waitForLockWaiter(setup.backend);
    const restReplies = rest.map((send) => send());
    const queued = () => campaigns.reduce((n, c) => n + coalescer().waiting(TENANT, c), 0);
    await waitFor(() => (queued() === rest.length ? true : undefined), `${rest.length} issues queued`);
    return { firstReplies, restReplies };
  }
  const allIssued = async (replies: ReturnType<typeof issue>[]) =>
    expect((await Promise.all(replies)).map(statusOf)).toEqual(replies.map(() => 'ISSUED'));

  it(`as many issues of a tenant as SIDE_BY_SIDE (${SIDE_BY_SIDE}) run at once, each alone; only the next waits for the first of them to end`, async () => {
    await createCampaign('side', 100_000);
    expect(statusOf(await issue('side', 'learner'))).toBe('ISSUED');
    const before = { ...coalescer().counts, sizes: [...coalescer().counts.sizes] };
    await setup.holder.query('begin');
    await setup.holder.query(`select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'side' for update`);
    const firsts = await fillLine(coalescer(), (member) => issue('side', member), 'side');
    // Every one of them is in flight and none waits: none found its line full.
    expect(coalescer().waiting(TENANT, 'side')).toBe(0);
    const next = issue('side', 'side-next');
    await waitFor(() => (coalescer().waiting(TENANT, 'side') === 1 ? true : undefined), 'the next issue waiting');
    expect(coalescer().inFlight(TENANT)).toBe(SIDE_BY_SIDE);
    await setup.holder.query('commit');
    await allIssued([...firsts, next]);
    // The one that waited ran alone (too few for a batch) once the first statement ended: no batch, the line empty.
    expect(coalescer().counts.batches - before.batches).toBe(0);
    expect((coalescer().counts.sizes[1] ?? 0) - (before.sizes[1] ?? 0)).toBe(1);
    expect(coalescer().inFlight(TENANT)).toBe(0);
    expect(await count('coupons', `tenant_id = $1 and campaign_id = 'side'`, [TENANT])).toBe(1 + SIDE_BY_SIDE + 1);
  });

  it('issues that meet while a statement of their campaign is in flight run as one statement: each its own coupon, event, audit row and answer', async () => {
    await createCampaign('meet', 100_000);
    expect(statusOf(await issue('meet', 'learner'))).toBe('ISSUED');
    const before = { ...coalescer().counts };
    const members = Array.from({ length: 8 }, (_, i) => `meet-${i}`);
    // One member's coupon is already there (and held by a checkout), one resends with a key: neither changes the others' answers.
    expect(statusOf(await issue('meet', members[0]!))).toBe('ISSUED');
    await setup.backend.sql.query(`update coupons set held_by_order_id = gen_random_uuid() where tenant_id = $1 and member_id = $2`, [
      TENANT,
      members[0],
    ]);
    const { firstReplies, restReplies } = await queuedBehind(
      'meet',
      `select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'meet' for update`,
      members.map((m, i) => () => issueWithStatus('meet', m, i === 3 ? 'meet-key' : undefined)),
    );
    await setup.holder.query('commit');
    await allIssued(firstReplies);
    const replies = await Promise.all(restReplies);
    expect(replies.map(statusOf)).toEqual(['ALREADY_ISSUED', ...members.slice(1).map(() => 'ISSUED')]);
    // Each coupon's status as the batch's statement read it: the held one's, and each new one's.
    expect(replies.map((reply) => reply.body.data?.issueCoupon.coupon?.status)).toEqual([
      'HELD',
      ...members.slice(1).map(() => 'AVAILABLE'),
    ]);
    expect(coalescer().counts.batches - before.batches).toBe(1);
    expect(coalescer().counts.members - before.members).toBe(members.length);
    expect(coalescer().counts.failed - before.failed).toBe(0);
    // What an operator sizes COUPON_ISSUE_BATCH_MAX by: the counts on /metrics.
    const scraped = await setup.backend.services.metrics.scrape();
    expect(counterValue(scraped, 'coupon_issue_batches_total')).toBe(coalescer().counts.batches);
    expect(counterValue(scraped, 'coupon_issue_batched_members_total')).toBe(coalescer().counts.members);
    for (const [i, reply] of replies.entries()) {
      expect(reply.body.data?.issueCoupon.coupon).toMatchObject({
        memberId: members[i],
        campaignId: 'meet',
        amountYen: 500,
      });
    }
    const coupons = await setup.backend.sql.query(`select member_id, id from coupons where tenant_id = $1 and campaign_id = 'meet'`, [
      TENANT,
    ]);
    // The learner's, the line's and the batch's members' (one of them issued before).
    expect(coupons.rows).toHaveLength(1 + SIDE_BY_SIDE + members.length);
    expect(await count('outbox_events', `tenant_id = $1 and payload->>'campaignId' = 'meet'`, [TENANT])).toBe(
      1 + SIDE_BY_SIDE + members.length,
    );
    expect(await count('audit_log', `tenant_id = $1 and operation = 'issueCoupon' and entity_ids[2] = 'meet'`, [TENANT])).toBe(
      2 + SIDE_BY_SIDE + members.length,
    );
    const slot = await setup.backend.sql.query(
      `select issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'meet'`,
      [TENANT],
    );
    expect(slot.rows[0].issued_yen).toBe((1 + SIDE_BY_SIDE + members.length) * 500);
    // The keyed member's stored answer replays as it was first given.
    const resent = await issueWithStatus('meet', members[3]!, 'meet-key');
    expect(resent.headers.get('idempotent-replayed')).toBe('true');
    expect(resent.body.data).toEqual(replies[3]!.body.data);
  });

  it('issues on several campaigns of a tenant that meet run as one statement: one slot of each campaign pays for all of its members, each member its own coupon', async () => {
    // One campaign of one budget row and one of three slots, each learned first.
    await createCampaign('across-row', 100_000);
    await createCampaign('across-slots', 100_000, 3);
    expect(statusOf(await issue('across-row', 'across-learner-row'))).toBe('ISSUED');
    expect(statusOf(await issue('across-slots', 'across-learner-slots'))).toBe('ISSUED');
    const before = { ...coalescer().counts };
    const asks = [
      ['across-row', 'across-a'],
      ['across-slots', 'across-b'],
      ['across-row', 'across-c'],
      ['across-slots', 'across-d'],
      ['across-slots', 'across-e'],
    ] as const;
    const { firstReplies, restReplies } = await queuedBehind(
      ['across-row', 'across-slots'],
      `select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'across-row' for update`,
      asks.map(
        ([campaign, member]) =>
          () =>
            issue(campaign, member),
      ),
    );
    await setup.holder.query('commit');
    await allIssued(firstReplies);
    const replies = await Promise.all(restReplies);
    expect(replies.map(statusOf)).toEqual(asks.map(() => 'ISSUED'));
    expect(coalescer().counts.batches - before.batches).toBe(1);
    expect(coalescer().counts.members - before.members).toBe(asks.length);
    expect(coalescer().counts.failed - before.failed).toBe(0);
    for (const [i, reply] of replies.entries()) {
      expect(reply.body.data?.issueCoupon.coupon).toMatchObject({ campaignId: asks[i]![0], memberId: asks[i]![1], amountYen: 500 });
    }
    const issued = await setup.backend.sql.query(
      `select campaign_id, sum(issued_yen)::int as yen, count(*) filter (where issued_yen > 0)::int as slots_used
         from campaign_budget_slots where tenant_id = $1 and campaign_id like 'across-%' group by campaign_id order by campaign_id`,
      [TENANT],
    );
    // across-slots: its learner's coupon in one slot, the batch's three taken at once from one slot (maybe the same).
    expect(issued.rows).toEqual([
      { campaign_id: 'across-row', yen: (1 + SIDE_BY_SIDE + 2) * 500, slots_used: 1 },
      { campaign_id: 'across-slots', yen: 4 * 500, slots_used: expect.any(Number) },
    ]);
    const slotYen = await setup.backend.sql.query(
      `select issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'across-slots' and issued_yen > 0`,
      [TENANT],
    );
    expect(Math.max(...slotYen.rows.map((r) => Number(r.issued_yen)))).toBeGreaterThanOrEqual(3 * 500);
    expect(await count('outbox_events', `tenant_id = $1 and payload->>'campaignId' like 'across-%'`, [TENANT])).toBe(
      2 + SIDE_BY_SIDE + asks.length,
    );
  });

  it('a double tap in the queue runs in the next batch, never twice in one: one coupon, ALREADY_ISSUED for the other', async () => {
    await createCampaign('taps', 100_000);
    expect(statusOf(await issue('taps', 'learner'))).toBe('ISSUED');
    const { firstReplies, restReplies } = await queuedBehind(
      'taps',
      `select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'taps' for update`,
      TAPS.map((m) => () => issue('taps', m)),
    );
    await setup.holder.query('commit');
    await allIssued(firstReplies);
    const statuses = (await Promise.all(restReplies)).map(statusOf);
    // Which of a member's taps is queued first is up to the server: one of them is ISSUED, the other ALREADY_ISSUED.
    const byMember = (member: string) => statuses.filter((_, i) => TAPS[i] === member).sort();
    expect(byMember('tap-a')).toEqual(['ALREADY_ISSUED', 'ISSUED']);
    expect(byMember('tap-b')).toEqual(['ALREADY_ISSUED', 'ISSUED']);
    expect(byMember('tap-c')).toEqual(['ISSUED']);
    expect(await count('coupons', `tenant_id = $1 and campaign_id = 'taps'`, [TENANT])).toBe(1 + SIDE_BY_SIDE + 3);
  });

  it('a batch whose member meets a month row gone to the cap meanwhile fails whole, and its members run alone: the others issue, that one is refused', async () => {
    await createCampaign('whole', 100_000);
    expect(statusOf(await issue('whole', 'learner'))).toBe('ISSUED');
    // capped's month row exists, so a transaction of the test's can lock it and take it to the cap.
    await setup.backend.sql.query(
      `insert into member_monthly_usage (tenant_id, member_id, month, used_yen)
       select $1, 'capped', month, 0 from coupons where tenant_id = $1 and member_id = 'learner' and campaign_id = 'whole'`,
      [TENANT],
    );
    let replies: Awaited<ReturnType<typeof issue>>[] = [];
    let failed = 0;
    // A second transaction takes capped's month row to the cap, uncommitted: the batch's snapshot reads room, its write waits.
    const capper = new pg.Client({ connectionString: setup.backend.databaseUrl });
    await capper.connect();
    try {
      await capper.query('begin');
      await capper.query(`update member_monthly_usage set used_yen = $2 where tenant_id = $1 and member_id = 'capped'`, [TENANT, CAP]);
      const before = { ...coalescer().counts };
      const capperPid = (await capper.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      const { firstReplies, restReplies } = await queuedBehind(
        'whole',
        `select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'whole' for update`,
        ['whole-a', 'capped', 'whole-b', 'whole-c'].map((m) => () => issue('whole', m)),
      );
      await setup.holder.query('commit');
      await waitFor(() => (coalescer().counts.batches > before.batches ? true : undefined), 'the batch');
      // The batch's statement waits for capped's month row, which the capper holds.
      await waitFor(
        async () =>
          (await setup.backend.sql.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [capperPid])).rowCount
            ? true
            : undefined,
        'the batch waiting for the capped month row',
      );
      await capper.query('commit');
      await allIssued(firstReplies);
      replies = await Promise.all(restReplies);
      failed = coalescer().counts.failed - before.failed;
    } finally {
      await capper.end();
    }
    expect(replies.map(statusOf)).toEqual(['ISSUED', 'MONTHLY_CAP', 'ISSUED', 'ISSUED']);
    expect(failed).toBe(1);
    expect(counterValue(await setup.backend.services.metrics.scrape(), 'coupon_issue_batches_failed_total')).toBe(
      coalescer().counts.failed,
    );
    // The learner's, the line's and the three members' who are not capped.
    const coupons = 1 + SIDE_BY_SIDE + 3;
    expect(await count('coupons', `tenant_id = $1 and campaign_id = 'whole'`, [TENANT])).toBe(coupons);
    expect(await count('coupons', `tenant_id = $1 and member_id = 'capped'`, [TENANT])).toBe(0);
    expect(await count('outbox_events', `tenant_id = $1 and payload->>'campaignId' = 'whole'`, [TENANT])).toBe(coupons);
    const slot = await setup.backend.sql.query(
      `select issued_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'whole'`,
      [TENANT],
    );
    expect(slot.rows[0].issued_yen).toBe(coupons * 500);
  });
});

// Issues waiting for a batch hold neither a pool connection nor an admission turn: with as many
// connections as the line's statements in flight and one turn more, a batch still gathers every
// issue that arrived while those statements were held.
describe('issueCoupon batching with fewer connections and turns than waiting issues', () => {
  const WAITING = 12;
  const [POOL, TURNS] = [SIDE_BY_SIDE, SIDE_BY_SIDE + 1];
  const setup = batchingBackend({ env: { DB_POOL_MAX: String(POOL), MAX_IN_FLIGHT: String(TURNS) } });

  const issue = (member: string) =>
    gql(setup.backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'narrow' } }, asUser(TENANT, member));

  it(`gathers ${WAITING} waiting issues into one batch on a pool of ${POOL} and ${TURNS} turns: each its own coupon`, async () => {
    await learnedCampaign(setup.backend, 'narrow');
    const coalescer = setup.backend.services.issueCoalescer;
    const before = { ...coalescer.counts, sizes: [...coalescer.counts.sizes] };
    await setup.holder.query('begin');
    await setup.holder.query(`select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'narrow' for update`);
    const firsts = await fillLine(coalescer, issue, 'narrow');
    await waitForLockWaiter(setup.backend);
    const members = Array.from({ length: WAITING }, (_, i) => `narrow-${i}`);
    const replies = members.map((member) => issue(member));
    // Each holding its turn and connection, at most one could wait (the one turn the line's statements leave).
    await waitFor(() => (coalescer.waiting(TENANT, 'narrow') === WAITING ? true : undefined), `${WAITING} issues waiting`, 60_000);
    await setup.holder.query('commit');
    expect((await Promise.all(firsts)).map((reply) => reply.body.data?.issueCoupon.status)).toEqual(firsts.map(() => 'ISSUED'));
    expect((await Promise.all(replies)).map((reply) => reply.body.data?.issueCoupon.status ?? reply.body.errors)).toEqual(
      members.map(() => 'ISSUED'),
    );
    expect(coalescer.counts.batches - before.batches).toBe(1);
    expect((coalescer.counts.sizes[WAITING] ?? 0) - (before.sizes[WAITING] ?? 0)).toBe(1);
    const coupons = await setup.backend.sql.query(
      `select count(*)::int as n from coupons where tenant_id = $1 and campaign_id = 'narrow'`,
      [TENANT],
    );
    expect(coupons.rows[0].n).toBe(1 + SIDE_BY_SIDE + WAITING);
  });
});

// A waiting issue gave its admission turn back; when its batch is decided it must take a turn
// again before it sends anything. One that cannot (the server too busy) sends nothing: the batch's
// leader hands its members to statements of their own, and each of them, with no turn either,
// answers TRY_AGAIN having written nothing; the line is free for the next issue.
describe('issueCoupon batching when a waiting issue gets no turn back', () => {
  const MEMBERS = ['unturned-a', 'unturned-b', 'unturned-c', 'unturned-d'];
  let refuseTurns = false;
  const setup = batchingBackend({
    standIns: {
      admissionPolicy: (options) => {
        const fair = fairAdmission(options);
        const refusing: Admission = {
          admit: (key, signal, deadline) =>
            refuseTurns
              ? { ok: false, error: tryAgain('no turn for the test', { reason: 'busy', retryAfterMs: 0 }) }
              : fair.admit(key, signal, deadline),
          stats: () => fair.stats(),
        };
        return refusing;
      },
    },
  });

  const issue = (member: string) =>
    gql(setup.backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'unturned' } }, asUser(TENANT, member));
  const countFor = async (table: string, memberColumn: string) =>
    Number(
      (
        await setup.backend.sql.query(`select count(*) as n from ${table} where tenant_id = $1 and ${memberColumn} = any($2)`, [
          TENANT,
          MEMBERS,
        ])
      ).rows[0].n,
    );

  it('answers TRY_AGAIN for every member, writes nothing for them, and leaves the line free', async () => {
    await learnedCampaign(setup.backend, 'unturned');
    const coalescer = setup.backend.services.issueCoalescer;
    const before = { ...coalescer.counts };
    await setup.holder.query('begin');
    await setup.holder.query(`select 1 from campaign_budget_slots where tenant_id = '${TENANT}' and campaign_id = 'unturned' for update`);
    const firsts = await fillLine(coalescer, issue, 'unturned');
    await waitForLockWaiter(setup.backend);
    const replies = MEMBERS.map((member) => issue(member));
    await waitFor(() => (coalescer.waiting(TENANT, 'unturned') === MEMBERS.length ? true : undefined), 'the members waiting');
    refuseTurns = true;
    await setup.holder.query('commit');
    // The line's own statements held their turns: they issue.
    expect((await Promise.all(firsts)).map((reply) => reply.body.data?.issueCoupon.status)).toEqual(firsts.map(() => 'ISSUED'));
    const answers = await Promise.all(replies);
    refuseTurns = false;
    for (const reply of answers) {
      expect(reply.body.data?.issueCoupon ?? null).toBeNull();
      expect(errorCodes(reply)).toEqual(['TRY_AGAIN']);
      expect(reply.body.errors?.[0]?.extensions?.['reason']).toBe('busy');
    }
    // No member got as far as a statement: no batch ran, and none of them has a coupon, an event or a month row.
    expect(coalescer.counts.batches - before.batches).toBe(0);
    expect(await countFor('coupons', 'member_id')).toBe(0);
    expect(await countFor('member_monthly_usage', 'member_id')).toBe(0);
    expect(await countFor('outbox_events', "payload->>'memberId'")).toBe(0);
    expect(coalescer.waiting(TENANT, 'unturned')).toBe(0);
    // The resend, with turns to be had, issues: nothing of the refused attempt is in its way.
    for (const member of MEMBERS) expect((await issue(member)).body.data?.issueCoupon.status).toBe('ISSUED');
  });
});
