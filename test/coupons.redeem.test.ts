import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUPON_REDEEMED_TOPIC } from '../src/features/coupons/redeem.js';
import { CreateCampaignDocument, IssueCouponDocument, RedeemCouponDocument } from './generated/graphql.js';
import {
  asTenantAdmin,
  asUser,
  callAction,
  createTenant,
  createTestBackend,
  errorCodes,
  gql,
  gqlOk,
  type TestBackend,
} from './support/harness.js';

const TENANT = 'redeem-shop';
const OTHER_TENANT = 'redeem-other';

describe('redeemCoupon, one request at a time', () => {
  let backend: TestBackend;
  let now = new Date('2026-10-12T01:00:00Z');
  const fetch = (request: Request) => backend.app.fetch(request);
  const redeem = (couponId: string, member = 'alice', extra: Record<string, string> = {}) =>
    gql(fetch, RedeemCouponDocument, { input: { couponId } }, { ...asUser(TENANT, member), ...extra });
  const issue = async (campaignId: string, member = 'alice') =>
    (await gqlOk(fetch, IssueCouponDocument, { input: { campaignId } }, asUser(TENANT, member))).issueCoupon.coupon!;
  /** What a redeem may write: the coupon's redeemed_at, its event, its audit row. */
  const written = async (couponId: string) => {
    const [coupon, events, audit] = await Promise.all([
      backend.sql.query('select redeemed_at from coupons where tenant_id = $1 and id = $2', [TENANT, couponId]),
      backend.sql.query<{ payload: Record<string, unknown> }>(
        "select payload from outbox_events where tenant_id = $1 and topic = $2 and payload->>'couponId' = $3",
        [TENANT, COUPON_REDEEMED_TOPIC, couponId],
      ),
      backend.sql.query<{ actor_user_id: string; role: string; entity_ids: string[] }>(
        "select actor_user_id, role, entity_ids from audit_log where tenant_id = $1 and operation = 'redeemCoupon' and $2 = any(entity_ids)",
        [TENANT, couponId],
      ),
    ]);
    return {
      redeemedAt: (coupon.rows[0]?.redeemed_at as Date | null | undefined) ?? null,
      events: events.rows.map((row) => row.payload),
      audit: audit.rows,
    };
  };
  const storedKeys = async (key: string) =>
    (await backend.sql.query('select 1 from idempotency_keys where tenant_id = $1 and key = $2', [TENANT, key])).rowCount;

  beforeAll(async () => {
    backend = await createTestBackend({ clock: () => now });
    await createTenant(backend, TENANT, 100_000);
    await createTenant(backend, OTHER_TENANT, 100_000);
    for (const id of ['spring', 'summer', 'autumn', 'winter', 'keyed']) {
      await gqlOk(fetch, CreateCampaignDocument, { input: { id, name: id, discountYen: 500, budgetYen: 50_000 } }, asTenantAdmin(TENANT));
    }
  });
  afterAll(() => backend.close());

  it('redeems the owner’s coupon once: REDEEMED, then ALREADY_REDEEMED with the first time', async () => {
    const coupon = await issue('spring');
    const first = await redeem(coupon.id);
    expect(first.body).toEqual({
      data: { redeemCoupon: { status: 'REDEEMED', redeemedAt: now.toISOString(), coupon: { ...coupon, status: 'REDEEMED' } } },
    });
    const redeemedAt = now;
    now = new Date('2026-10-12T02:00:00Z');
    const again = await redeem(coupon.id);
    expect(again.body).toEqual({
      data: {
        redeemCoupon: { status: 'ALREADY_REDEEMED', redeemedAt: redeemedAt.toISOString(), coupon: { ...coupon, status: 'REDEEMED' } },
      },
    });
    const stored = await written(coupon.id);
    expect(stored.redeemedAt).toEqual(redeemedAt);
    expect(stored.events).toEqual([
      {
        couponId: coupon.id,
        tenantId: TENANT,
        campaignId: 'spring',
        memberId: 'alice',
        amountYen: 500,
        redeemedAt: redeemedAt.toISOString(),
      },
    ]);
    // Like every committed mutation, each answer has its audit row: who, as what, on which coupon.
    expect(stored.audit).toEqual([
      { actor_user_id: 'alice', role: 'user', entity_ids: [coupon.id, 'spring'] },
      { actor_user_id: 'alice', role: 'user', entity_ids: [coupon.id, 'spring'] },
    ]);
  });

  it('answers NOT_FOUND for another member’s coupon, another tenant’s and one that does not exist, and writes nothing', async () => {
    const coupon = await issue('summer', 'bob');
    const attempts = [
      await redeem(coupon.id, 'alice', { 'idempotency-key': 'not-mine-1' }),
      await gql(fetch, RedeemCouponDocument, { input: { couponId: coupon.id } }, asUser(OTHER_TENANT, 'bob')),
      await redeem('00000000-0000-4000-8000-000000000000', 'bob'),
    ];
    for (const attempt of attempts) {
      expect(errorCodes(attempt)).toEqual(['NOT_FOUND']);
      expect(attempt.body.errors![0]!.message).toBe('Coupon not found');
    }
    expect(await written(coupon.id)).toEqual({ redeemedAt: null, events: [], audit: [] });
    expect(await storedKeys('not-mine-1')).toBe(0);
    expect((await redeem(coupon.id, 'bob')).body.data?.redeemCoupon.status).toBe('REDEEMED');
  });

  it('refuses a voided coupon as data and leaves nothing behind', async () => {
    const coupon = await issue('autumn');
    await backend.sql.query('update coupons set voided_at = now() where tenant_id = $1 and id = $2', [TENANT, coupon.id]);
    const refused = await redeem(coupon.id, 'alice', { 'idempotency-key': 'voided-1' });
    expect(refused.body).toEqual({
      data: { redeemCoupon: { status: 'VOIDED', redeemedAt: null, coupon: { ...coupon, status: 'VOIDED' } } },
    });
    expect(await written(coupon.id)).toEqual({ redeemedAt: null, events: [], audit: [] });
    expect(await storedKeys('voided-1')).toBe(0);
  });

  it('is refused to a tenant admin and to a caller without a session, and asks for a UUID', async () => {
    const coupon = await issue('winter');
    const admin = await gql(fetch, RedeemCouponDocument, { input: { couponId: coupon.id } }, asTenantAdmin(TENANT));
    expect(errorCodes(admin)).toEqual(['FORBIDDEN']);
    expect(errorCodes(await gql(fetch, RedeemCouponDocument, { input: { couponId: coupon.id } }))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await redeem('not-a-uuid'))).toEqual(['BAD_USER_INPUT']);
    expect((await written(coupon.id)).redeemedAt).toBeNull();
  });

  it('with an Idempotency-Key, a resend replays the first answer and redeems nothing more', async () => {
    const coupon = await issue('keyed');
    const first = await redeem(coupon.id, 'alice', { 'idempotency-key': 'redeem-tap-1' });
    now = new Date('2026-10-12T03:00:00Z');
    const resent = await redeem(coupon.id, 'alice', { 'idempotency-key': 'redeem-tap-1' });
    expect(first.body.data?.redeemCoupon.status).toBe('REDEEMED');
    expect(resent.text).toBe(first.text);
    expect(resent.headers.get('idempotent-replayed')).toBe('true');
    const stored = await written(coupon.id);
    expect(stored.events).toHaveLength(1);
    expect(stored.audit).toHaveLength(1);
    // A new key is a new request: the coupon is redeemed already.
    const tapped = await redeem(coupon.id, 'alice', { 'idempotency-key': 'redeem-tap-2' });
    expect(tapped.body.data?.redeemCoupon).toMatchObject({
      status: 'ALREADY_REDEEMED',
      redeemedAt: first.body.data?.redeemCoupon.redeemedAt,
    });
  });

  it('is a Hasura action like the others: POST /actions answers the payload itself', async () => {
    const coupon = await issue('spring', 'carol');
    const response = await callAction(
      fetch,
      'redeemCoupon',
      { couponId: coupon.id },
      {
        'x-hasura-role': 'user',
        'x-hasura-tenant-id': TENANT,
        'x-hasura-user-id': 'carol',
      },
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'REDEEMED', redeemedAt: now.toISOString(), coupon: { ...coupon, status: 'REDEEMED' } });
  });
});
