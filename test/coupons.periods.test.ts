import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CampaignDocument,
  CheckoutDocument,
  CreateCampaignDocument,
  IssueCouponDocument,
  MyCouponsDocument,
  RedeemCouponDocument,
  type CreateCampaignInput,
} from './generated/graphql.js';
import { assertTimeZoneKnown, UnknownTimeZoneError } from '../src/features/coupons/period.js';
import { stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { withoutRoleTimeouts } from './support/coupon-run.js';
import { asTenantAdmin, asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Campaigns over time, one request at a time: the period a campaign issues in, judged on the
// database's clock, on both ways an issue runs (the one statement, and the transaction when the
// session lacks the role's timeouts); coupons that expire with nothing written; a coupon held by an
// order before it expired still paying for that order. Each answer's writes are counted with SQL.

const TENANT = 'periods';
const HOUR_MS = 3_600_000;

describe('campaign periods and coupon expiry, one request at a time', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  /** The same database, every issue on the transaction path. */
  let transactionPath: TestBackend;
  const admin = asTenantAdmin(TENANT);
  const create = (input: Partial<CreateCampaignInput> & { id: string }, target = backend) =>
    gql(target.app.fetch, CreateCampaignDocument, { input: { name: input.id, discountYen: 100, budgetYen: 10_000, ...input } }, admin);
  const issue = (target: TestBackend, campaignId: string, member: string, key?: string) =>
    gql(
      target.app.fetch,
      IssueCouponDocument,
      { input: { campaignId } },
      { ...asUser(TENANT, member), ...(key ? { 'idempotency-key': key } : {}) },
    );
  const dbNow = async () => (await backend.sql.query<{ now: Date }>('select now()')).rows[0]!.now;
  /** Waits for the database's clock, the one that decides, to reach `instant`. */
  const untilDatabaseTime = async (instant: Date) => {
    while ((await dbNow()) < instant) await sleep(20);
  };
  /** Everything an issue of `campaignId` may write or count, and the month rows of its `members`. */
  const written = async (campaignId: string, members: string[]) =>
    (
      await backend.sql.query(
        `select (select count(*)::int from coupons where tenant_id = $1 and campaign_id = $2) as coupons,
                (select coalesce(sum(issued_yen), 0)::int from campaign_budget_slots where tenant_id = $1 and campaign_id = $2) as issued_yen,
                (select count(*)::int from outbox_events where tenant_id = $1 and payload->>'campaignId' = $2) as events,
                (select count(*)::int from audit_log where tenant_id = $1 and operation = 'issueCoupon' and $2 = any(entity_ids)) as audit_rows,
                (select count(*)::int from member_monthly_usage where tenant_id = $1 and member_id = any($3)) as usage_rows`,
        [TENANT, campaignId, members],
      )
    ).rows[0];
  const keptKeys = async (key: string) =>
    (await backend.sql.query('select 1 from idempotency_keys where tenant_id = $1 and key = $2 and expires_at > now()', [TENANT, key]))
      .rowCount;

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await createTestBackend({ env: stubPayments(stub) });
    transactionPath = await createTestBackend({ databaseUrl: withoutRoleTimeouts(backend.databaseUrl) });
    await createTenant(backend, TENANT, 1_000_000);
  });
  afterAll(async () => {
    await transactionPath.close();
    await backend.close();
    await stub.close();
  });

  it("starts a campaign at its creation on the database's clock unless told, with no end and coupons that never expire", async () => {
    const before = await dbNow();
    const made = (await create({ id: 'always' })).body.data!.createCampaign.campaign;
    expect(made).toMatchObject({ endsAt: null, couponsExpireAt: null });
    expect(new Date(made.startsAt).getTime()).toBeGreaterThanOrEqual(before.getTime() - 1);
    expect(new Date(made.startsAt).getTime()).toBeLessThanOrEqual((await dbNow()).getTime());
    const period = {
      startsAt: '2027-09-19T00:00:00.000Z',
      endsAt: '2027-09-24T00:00:00.000Z',
      couponsExpireAt: '2027-10-31T15:00:00.000Z',
    };
    expect((await create({ id: 'silver-week', ...period })).body.data!.createCampaign.campaign).toMatchObject(period);
    expect((await gqlOk(backend.app.fetch, CampaignDocument, { id: 'silver-week' }, asUser(TENANT))).campaign).toMatchObject(period);
  });

  it('refuses a period that ends before it starts, or coupons that expire before it starts, with BAD_USER_INPUT and nothing written', async () => {
    const count = async () =>
      (await backend.sql.query('select count(*)::int as n from campaigns where tenant_id = $1', [TENANT])).rows[0].n;
    const before = await count();
    const start = '2027-01-01T00:00:00.000Z';
    for (const input of [
      { startsAt: start, endsAt: start },
      { startsAt: start, endsAt: '2026-12-31T23:59:59.999Z' },
      { startsAt: start, couponsExpireAt: '2026-12-31T23:59:59.999Z' },
      // No startsAt: it starts at its creation, and an end or expiry already past comes before it.
      { endsAt: '2026-01-01T00:00:00.000Z' },
      { couponsExpireAt: '2026-01-01T00:00:00.000Z' },
      { startsAt: '10000-01-01T00:00:00.000Z' },
      { endsAt: 'next tuesday' },
    ]) {
      expect(errorCodes(await create({ id: 'wrong', ...input })), JSON.stringify(input)).toEqual(['BAD_USER_INPUT']);
    }
    // Coupons may expire the instant the campaign starts (a campaign for a moment's sale).
    expect((await create({ id: 'instant', startsAt: start, couponsExpireAt: start })).body.errors).toBeUndefined();
    expect(await count()).toBe(before + 1);
  });

  for (const path of ['one statement', 'transaction'] as const) {
    it(`answers NOT_STARTED before startsAt and ENDED from endsAt on (${path}): nothing written or counted, a key kept no longer than its claim`, async () => {
      const target = path === 'one statement' ? backend : transactionPath;
      const soon = `soon-${path.replace(' ', '-')}`;
      const over = `over-${path.replace(' ', '-')}`;
      const [alice, early, late] = ['alice', 'early', 'late'].map((member) => `${member}-${soon}`) as [string, string, string];
      const now = await dbNow();
      await create({ id: soon, startsAt: new Date(now.getTime() + HOUR_MS).toISOString() });
      await create({
        id: over,
        startsAt: new Date(now.getTime() - 2 * HOUR_MS).toISOString(),
        endsAt: new Date(now.getTime() + HOUR_MS).toISOString(),
      });
      // A member who took the coupon while it ran: from the end on, ENDED too.
      expect((await issue(target, over, early)).body.data!.issueCoupon.status).toBe('ISSUED');
      await backend.sql.query("update campaigns set ends_at = now() - interval '1 second' where tenant_id = $1 and id = $2", [
        TENANT,
        over,
      ]);
      const beforeOver = await written(over, [early, late]);

      for (const key of [undefined, `k-${soon}`]) {
        expect((await issue(target, soon, alice, key)).body.data!.issueCoupon).toEqual({ status: 'NOT_STARTED', coupon: null });
      }
      for (const member of [early, late]) {
        expect((await issue(target, over, member, `k-${member}`)).body.data!.issueCoupon).toEqual({ status: 'ENDED', coupon: null });
      }
      expect(await written(soon, [alice])).toEqual({ coupons: 0, issued_yen: 0, events: 0, audit_rows: 0, usage_rows: 0 });
      expect(await written(over, [early, late])).toEqual(beforeOver);
      expect(await keptKeys(`k-${soon}`)).toBe(0);
      expect(await keptKeys(`k-${late}`)).toBe(0);

      // Its startsAt come (moved into the past, as an hour passing would), the same key runs afresh.
      await backend.sql.query("update campaigns set starts_at = now() - interval '1 second' where tenant_id = $1 and id = $2", [
        TENANT,
        soon,
      ]);
      const opened = (await issue(target, soon, alice, `k-${soon}`)).body.data!.issueCoupon;
      expect(opened.status).toBe('ISSUED');
      const { starts_at: startsAt } = (
        await backend.sql.query('select starts_at from campaigns where tenant_id = $1 and id = $2', [TENANT, soon])
      ).rows[0];
      expect(new Date(opened.coupon!.issuedAt).getTime()).toBeGreaterThanOrEqual(startsAt.getTime());
      expect(await written(soon, [alice])).toEqual({ coupons: 1, issued_yen: 100, events: 1, audit_rows: 1, usage_rows: 1 });
    });
  }

  it('reads EXPIRED from the time with nothing written; refuses it to redeem and checkout; a coupon held before stays good for its order', async () => {
    const expiresAt = new Date((await dbNow()).getTime() + 1_500);
    await create({ id: 'flash', couponsExpireAt: expiresAt.toISOString() });
    const coupons: Record<string, string> = {};
    for (const member of ['held', 'kept', 'late-redeem', 'late-checkout']) {
      const issued = (await issue(backend, 'flash', member)).body.data!.issueCoupon.coupon!;
      expect(issued.expiresAt).toBe(expiresAt.toISOString());
      coupons[member] = issued.id;
    }
    const statusOf = async (member: string) =>
      (await gqlOk(backend.app.fetch, MyCouponsDocument, {}, asUser(TENANT, member))).myCoupons[0]!;
    expect((await statusOf('kept')).status).toBe('AVAILABLE');
    // Held by an order before its expiry: the payment is held at the provider until the coupon has expired.
    const held = stub.hold();
    const paying = gql(
      backend.app.fetch,
      CheckoutDocument,
      { input: { amountYen: 1_000, couponId: coupons['held']!, paymentMethod: 'pm_card_visa' } },
      asUser(TENANT, 'held'),
    );
    await held.arrived;
    const rowVersions = async () =>
      (
        await backend.sql.query('select id, xmin::text from coupons where tenant_id = $1 and campaign_id = $2 order by id', [
          TENANT,
          'flash',
        ])
      ).rows;
    const versions = await rowVersions();

    await untilDatabaseTime(expiresAt);
    expect(await statusOf('kept')).toMatchObject({ status: 'EXPIRED', expiresAt: expiresAt.toISOString() });
    expect((await statusOf('held')).status).toBe('HELD');
    const redeemed = (
      await gql(backend.app.fetch, RedeemCouponDocument, { input: { couponId: coupons['late-redeem']! } }, asUser(TENANT, 'late-redeem'))
    ).body.data!.redeemCoupon;
    expect(redeemed).toMatchObject({ status: 'EXPIRED', redeemedAt: null, coupon: { status: 'EXPIRED' } });
    const checkout = await gql(
      backend.app.fetch,
      CheckoutDocument,
      { input: { amountYen: 1_000, couponId: coupons['late-checkout']!, paymentMethod: 'pm_card_visa' } },
      asUser(TENANT, 'late-checkout'),
    );
    expect(checkout.body.data!.checkout).toEqual({ status: 'COUPON_UNAVAILABLE', clientSecret: null, order: null });
    // No sweep and no refusal wrote anything: every coupon row is the version it was before the expiry.
    expect(await rowVersions()).toEqual(versions);
    const refusals = await backend.sql.query(
      `select (select count(*)::int from orders where tenant_id = $1 and member_id = 'late-checkout') as orders,
              (select count(*)::int from outbox_events where tenant_id = $1 and topic = 'coupon.redeemed') as redeemed_events`,
      [TENANT],
    );
    expect(refusals.rows[0]).toEqual({ orders: 0, redeemed_events: 0 });

    held.proceed();
    const paid = (await paying).body.data!.checkout;
    expect(paid.status).toBe('PAID');
    expect((await statusOf('held')).status).toBe('REDEEMED');
  });
});

describe('the business time zone, as the database reckons months in it', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it('a zone the database knows passes; one it does not stops start-up naming BUSINESS_TIME_ZONE (exit 2)', async () => {
    await expect(assertTimeZoneKnown(backend.database.db, 'Asia/Tokyo')).resolves.toBeUndefined();
    const refused = assertTimeZoneKnown(backend.database.db, 'Mars/Olympus');
    await expect(refused).rejects.toThrow(UnknownTimeZoneError);
    await expect(refused).rejects.toThrow(/^BUSINESS_TIME_ZONE: the database does not know the time zone "Mars\/Olympus"/);
    await expect(refused).rejects.toMatchObject({ exitCode: 2 });
  });
});
