import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Bookkeeping, KeyHeldElsewhere } from '../src/features/bookkeeping/bookkeeping.js';
import { runBatch } from '../src/features/coupons/issue-batch.js';
import { ConditionalIssuer, type IssueRequest, type IssueResult } from '../src/features/coupons/issue.js';
import { CampaignShapes } from '../src/features/coupons/budget.js';
import { RollbackAndReturn, runInTransaction } from '../src/db/transaction.js';
import { changeCampaignBudget } from '../src/features/coupons/budget-change.js';
import { claimValues, type ClaimValues } from '../src/features/idempotency/service.js';
import { insertCouponScenario } from './load/scenarios/coupons.js';
import { createTestBackend, type TestBackend } from './support/harness.js';

// A batch's outcomes are those of its members run one after another: for any state of one to three
// campaigns (one slot or several, each with its room) and any members spread over them (a coupon
// already held, a month near the cap, a key fresh or held by an answered request, a campaign not
// started or ended, a budget changed by changeCampaignBudget after the campaign issued), the batch statement and the one-issue statement run on each decided member in member
// order, in two tenants set up alike, give every member the same answer and leave the same
// coupons, month rows, budget, outbox events, audit rows and stored answers. Members the batch
// left ALONE are not decided by it and run later; the rest must form a serial order.

const DISCOUNT = 100;
const CAP = 300;
const campaignId = (c: number) => `batched-${c}`;
const TIME_ZONE = 'Asia/Tokyo';

interface MemberCase {
  /** Which of the batch's campaigns it asks for (modulo their number). */
  campaign: number;
  hasCoupon: boolean;
  usedYen: number;
  key: 'none' | 'fresh' | 'held';
}

type Period = 'open' | 'not started' | 'ended';

interface BatchCase {
  /** Per campaign, per slot: whole coupons of room, and yen short of one more. */
  campaigns: { room: number; short: number }[][];
  /** Per campaign (by index), where the database's now() stands in its period. */
  periods: Period[];
  /** Per campaign (by index), a budget change before the batch: to what it issued plus this many coupons and half a coupon's yen, or none. */
  changes: (number | null)[];
  members: MemberCase[];
}

const slots = fc.array(fc.record({ room: fc.integer({ min: 0, max: 4 }), short: fc.constantFrom(0, 50) }), { minLength: 1, maxLength: 4 });
const cases = fc.record({
  campaigns: fc.array(slots, { minLength: 1, maxLength: 3 }),
  periods: fc.array(fc.constantFrom<Period>('open', 'open', 'not started', 'ended'), { minLength: 3, maxLength: 3 }),
  changes: fc.array(fc.option(fc.integer({ min: 0, max: 6 })), { minLength: 3, maxLength: 3 }),
  members: fc.array(
    fc.record({
      campaign: fc.nat({ max: 2 }),
      hasCoupon: fc.boolean(),
      usedYen: fc.constantFrom(0, 100, 200, 250, 300),
      key: fc.constantFrom('none', 'fresh', 'held') as fc.Arbitrary<MemberCase['key']>,
    }),
    { minLength: 2, maxLength: 12 },
  ),
});

const memberId = (i: number) => `m-${String(i).padStart(2, '0')}`;
/** The campaign member case `m` asks for. */
const campaignOf = (c: BatchCase, m: MemberCase) => campaignId(m.campaign % c.campaigns.length);

async function setUp(backend: TestBackend, tenantId: string, c: BatchCase) {
  await insertCouponScenario(backend.services.pool, backend.services.transactions, {
    tenantId,
    capYen: CAP,
    campaigns: c.campaigns.map((slots, i) => ({ id: campaignId(i), discountYen: DISCOUNT, budgetYen: 100_000, budgetSlots: slots.length })),
    members: [],
    sends: 1,
    expectedIssued: null,
  });
  const { month } = (await backend.sql.query<{ month: string }>(`select to_char(now() at time zone $1, 'YYYY-MM') as month`, [TIME_ZONE]))
    .rows[0]!;
  for (const [i, slots] of c.campaigns.entries()) {
    const period = {
      open: "starts_at = now() - interval '1 hour'",
      'not started': "starts_at = now() + interval '1 hour'",
      ended: "starts_at = now() - interval '2 hours', ends_at = now() - interval '1 hour'",
    }[c.periods[i]!];
    await backend.sql.query(`update campaigns set ${period} where tenant_id = $1 and id = $2`, [tenantId, campaignId(i)]);
    for (const [slot, { room, short }] of slots.entries()) {
      await backend.sql.query(
        `update campaign_budget_slots set budget_yen = $3, issued_yen = $4 where tenant_id = $1 and campaign_id = $2 and slot = $5`,
        [tenantId, campaignId(i), 1_000 + room * DISCOUNT + short, 1_000, slot],
      );
    }
  }
  for (const [i, m] of c.members.entries()) {
    if (m.hasCoupon) {
      await backend.sql.query(
        `insert into coupons (tenant_id, campaign_id, member_id, month, amount_yen, issued_at) values ($1, $2, $3, $4, $5, now())`,
        [tenantId, campaignOf(c, m), memberId(i), month, DISCOUNT],
      );
    }
    if (m.usedYen > 0) {
      await backend.sql.query(`insert into member_monthly_usage (tenant_id, member_id, month, used_yen) values ($1, $2, $3, $4)`, [
        tenantId,
        memberId(i),
        month,
        m.usedYen,
      ]);
    }
    if (m.key === 'held') {
      // An answered request with the key: a live claim with its stored answer, which a member with the key replays.
      await backend.sql.query(
        `insert into idempotency_keys (tenant_id, user_id, role, key, fingerprint, operation, expires_at, response)
         values ($1, $2, 'member', $3, 'f', 'issueCoupon', now() + interval '1 hour', '{"status":"ALREADY_ISSUED","coupon":null}')`,
        [tenantId, memberId(i), `key-${i}`],
      );
    }
  }
  // A change takes every slot's lock and splits the new room anew: the batch then meets the slots it left.
  for (const [i, coupons] of c.changes.entries()) {
    if (coupons === null || i >= c.campaigns.length) continue;
    const id = campaignId(i);
    const { rows } = await backend.sql.query<{ issued: number }>(
      'select sum(issued_yen)::int as issued from campaign_budget_slots where tenant_id = $1 and campaign_id = $2',
      [tenantId, id],
    );
    await runInTransaction(backend.services.pool, backend.services.transactions, { deadline: Date.now() + 10_000 }, (trx) =>
      changeCampaignBudget(trx, { tenantId, campaignId: id, budgetYen: rows[0]!.issued + coupons * DISCOUNT + DISCOUNT / 2 }),
    );
  }
}

interface Member {
  request: IssueRequest;
  claim: ClaimValues | null;
  bookkeeping: () => Bookkeeping<IssueResult>;
}

function membersOf(tenantId: string, c: BatchCase): Member[] {
  return c.members.map((m, i) => {
    const claim =
      m.key === 'none'
        ? null
        : claimValues(
            { tenantId, userId: memberId(i), role: 'member' },
            { key: `key-${i}`, fingerprint: 'f', operation: 'issueCoupon' },
            24,
          );
    const base = {
      auditTenantId: tenantId,
      actorUserId: memberId(i),
      role: 'member',
      operation: 'issueCoupon',
      requestId: `r-${i}`,
      ...(claim ? { keyTenantId: claim.keyTenantId, keyUserId: claim.keyUserId, keyRole: claim.keyRole, key: claim.key } : {}),
    };
    return {
      request: { tenantId, memberId: memberId(i), campaignId: campaignOf(c, m), timeZone: TIME_ZONE },
      claim,
      bookkeeping: () => new Bookkeeping<IssueResult>(claim, base, () => ({ entityIds: [] })),
    };
  });
}

/** The product's issuer with shapes of its own and no coalescer: each issue its statement alone. */
function issuerOf(backend: TestBackend): ConditionalIssuer {
  const { transactions, budgetLeases } = backend.services;
  return new ConditionalIssuer({
    timeouts: transactions,
    leases: budgetLeases,
    shapes: new CampaignShapes(),
    coalescer: null,
    onRace: () => {},
  });
}

/** One member alone, through the one-issue statement: its answer's status, or KEY_HELD. */
async function issueAlone(backend: TestBackend, member: Member): Promise<string> {
  try {
    const result = await backend.services.pool
      .connection()
      .execute((db) => issuerOf(backend).runStatement(db, member.request, member.bookkeeping()));
    if (typeof result === 'symbol') return 'AS_TRANSACTION';
    return result.status;
  } catch (error) {
    if (error instanceof RollbackAndReturn) return (error.value as IssueResult).status;
    if (error instanceof KeyHeldElsewhere) return 'KEY_HELD';
    throw error;
  }
}

/** What a tenant's issues left: per member its coupons, month, events, audit rows and stored answer; each campaign's budget issued. */
async function standing(backend: TestBackend, tenantId: string) {
  const { rows } = await backend.sql.query<Record<string, unknown>>(
    `select m.member_id,
            (select count(*)::int from coupons k where k.tenant_id = $1 and k.member_id = m.member_id) as coupons,
            (select coalesce(sum(used_yen), 0)::int from member_monthly_usage u where u.tenant_id = $1 and u.member_id = m.member_id) as used_yen,
            (select count(*)::int from outbox_events e where e.tenant_id = $1 and e.payload->>'memberId' = m.member_id) as events,
            (select count(*)::int from audit_log a where a.tenant_id = $1 and a.actor_user_id = m.member_id) as audit_rows,
            (select coalesce(response->>'status', '') || case when expires_at > now() then ' kept' else ' expired' end
               from idempotency_keys i where i.tenant_id = $1 and i.user_id = m.member_id) as stored
       from (select distinct member_id from (select member_id from coupons where tenant_id = $1
                                             union select member_id from member_monthly_usage where tenant_id = $1
                                             union select user_id from idempotency_keys where tenant_id = $1) x) m
      order by m.member_id`,
    [tenantId],
  );
  const budget = await backend.sql.query<{ campaign_id: string; issued: number }>(
    `select campaign_id, sum(issued_yen)::int as issued from campaign_budget_slots where tenant_id = $1 group by campaign_id order by campaign_id`,
    [tenantId],
  );
  return { members: rows, issuedYen: budget.rows };
}

const statusOf = (outcome: string) => (outcome === 'ISSUE' ? 'ISSUED' : outcome);

describe('a batch of issues decides as its members would one after another', () => {
  let backend: TestBackend;
  let run = 0;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it('same answers, coupons, month rows, budget, events, audit rows and stored answers as the decided members in member order', async () => {
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        run++;
        const batched = `batch-${run}`;
        const serial = `serial-${run}`;
        await setUp(backend, batched, c);
        await setUp(backend, serial, c);
        const issuer = issuerOf(backend);
        const members = membersOf(batched, c);
        // Whole coupons of room in each campaign's slot with most, as the set-up (and a change) left them.
        const rooms = await Promise.all(
          c.campaigns.map(async (_, i) => {
            const { rows } = await backend.sql.query<{ most: number }>(
              `select max((budget_yen - issued_yen - leased_yen) / ${DISCOUNT})::int as most from campaign_budget_slots
                where tenant_id = $1 and campaign_id = $2`,
              [batched, campaignId(i)],
            );
            return { most: rows[0]!.most };
          }),
        );
        const rows = await backend.services.pool.connection().execute((db) =>
          runBatch(
            db,
            members.map((m) => ({ values: issuer.valuesOf(m.request, m.bookkeeping()), claim: m.claim })),
          ),
        );
        expect(rows.map((r) => r.outcome)).not.toContain('AS_TRANSACTION');
        // A member is left ALONE only when its campaign's slot with most room could pay for no more.
        // (A member whose key turns out held counts among those the slot pays for: the allotment is made before the claims.)
        for (const [i, { most }] of rooms.entries()) {
          const of = (m: MemberCase) => campaignOf(c, m) === campaignId(i);
          const open = c.periods[i] === 'open';
          const wants = c.members.filter((m) => open && of(m) && !m.hasCoupon && m.usedYen + DISCOUNT <= CAP).length;
          const alone = rows.filter((r, n) => r.outcome === 'ALONE' && of(c.members[n]!)).length;
          expect(alone).toBe(most > 0 ? Math.max(0, wants - most) : 0);
        }

        const serialMembers = membersOf(serial, c);
        const serialAnswers: (string | undefined)[] = [];
        for (const [i, row] of rows.entries()) {
          serialAnswers.push(row.outcome === 'ALONE' ? undefined : await issueAlone(backend, serialMembers[i]!));
        }
        const batchAnswers = rows.map((r) => (r.outcome === 'ALONE' ? undefined : statusOf(r.outcome)));
        expect(batchAnswers).toEqual(serialAnswers);
        // An issued coupon comes back whole, as one issue's answer carries it.
        for (const [i, row] of rows.entries()) {
          if (row.outcome === 'ISSUE') {
            expect(row).toMatchObject({ member_id: memberId(i), amount_yen: DISCOUNT, campaign_id: campaignOf(c, c.members[i]!) });
          }
        }
        expect(await standing(backend, batched)).toEqual(await standing(backend, serial));
      }),
      { numRuns: 30, endOnFailure: true },
    );
  }, 600_000);
});
