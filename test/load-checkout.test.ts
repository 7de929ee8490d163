import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { violationsOf } from './load/scenario.js';
import { cardFor, checkCheckoutInvariants, DEFAULT_CARDS, THREE_D_SECURE_CARD } from './load/scenarios/checkout.js';
import { QUICK_RECONCILER, runCheckoutLoad } from './support/checkout-load.js';
import { stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// npm run load --scenario checkout: members pay with and without coupons, and the run counts
// checkout's invariants in SQL (test/load-checkout.naive.test.ts shows them fail against a twin).

describe('npm run load --scenario checkout, through the simulated provider', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend();
  });
  afterAll(() => backend.close());

  it('holds: each PAID order one charge, each coupon at most one paid order, nothing pending; the check fails on tables that break them', async () => {
    const result = await runCheckoutLoad(backend, 'sim', {});
    expect(result.violations, JSON.stringify(result.checks)).toEqual([]);
    expect(result.checks!.map((check) => check.invariant)).toEqual([
      'each PAID order has exactly one charge, each CANCELED order none',
      'each coupon pays at most one order, and is redeemed when it did',
      'nothing left pending after the reconciler',
      'one PAID order per PAID answer',
    ]);
    // Four members tap their coupon twice at once: no coupon pays twice, and some member is told so.
    expect(result.outcomes).toMatchObject({ PAID: expect.any(Number), DECLINED: expect.any(Number) });
    expect(result.outcomes['COUPON_UNAVAILABLE'] ?? 0).toBeGreaterThan(0);
    const { rows } = await backend.sql.query<{ with_coupon: number; without: number }>(
      `select count(*) filter (where coupon_id is not null)::int as with_coupon, count(*) filter (where coupon_id is null)::int as without
         from orders where tenant_id = 'checkout-sim' and status = 'PAID'`,
    );
    expect(rows[0]!.with_coupon).toBeGreaterThan(0);
    expect(rows[0]!.without).toBeGreaterThan(0);
    // The 3-D Secure customers authenticated on the simulated provider's page: most paid, every fifth failed it.
    const authentication = await backend.sql.query<{ failed: number; paid: number }>(
      `select count(*) filter (where o.failure_code = 'payment_intent_authentication_failure')::int as failed,
              count(*) filter (where o.status = 'PAID')::int as paid
         from orders o join payment_intents p on p.tenant_id = o.tenant_id and p.order_id = o.id
        where o.tenant_id = 'checkout-sim' and p.payment_method = $1`,
      [THREE_D_SECURE_CARD],
    );
    expect(authentication.rows[0]!.failed).toBeGreaterThan(0);
    expect(authentication.rows[0]!.paid).toBeGreaterThan(authentication.rows[0]!.failed);

    // The same check on tables a broken checkout would leave: a PAID order without its charge, a CANCELED one charged.
    await backend.sql
      .query(`insert into orders (tenant_id, id, member_id, status, amount_yen, discount_yen, charged_yen, created_at, settled_at)
      values ('checkout-sim', gen_random_uuid(), 'buyer-1', 'PAID', 1000, 0, 1000, now(), now())`);
    await backend.sql.query(`update payment_intents set status = 'succeeded', decline_code = null
      where tenant_id = 'checkout-sim' and order_id = (select id from orders where tenant_id = 'checkout-sim' and status = 'CANCELED' limit 1)`);
    const violations = violationsOf(await checkCheckoutInvariants(backend.sql, 'checkout-sim', result.outcomes, 0));
    expect(violations).toContain('1 PAID orders without exactly one succeeded charge of their intent');
    expect(violations).toContain('1 succeeded charges of orders that are not PAID');
  });

  it('lays the card mix out over every hundred checkouts: 70 pay, 20 are declined, 10 ask for 3-D Secure', () => {
    const methods = Array.from({ length: 100 }, (_, i) => cardFor(DEFAULT_CARDS, i));
    expect(methods.filter((m) => m === 'pm_card_visa')).toHaveLength(70);
    expect(methods.filter((m) => m === 'pm_card_chargeDeclined')).toHaveLength(20);
    expect(methods.filter((m) => m === THREE_D_SECURE_CARD)).toHaveLength(10);
    // Spread out: no long run of declines.
    expect(methods.slice(0, 10)).toContain('pm_card_visa');
  });
});

describe('npm run load --scenario checkout, through STRIPE_API_URL with lost answers', () => {
  let stub: StripeStub;
  let backend: ServedBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY });
    backend = await serveTestBackend({ env: stubPayments(stub, QUICK_RECONCILER) });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('holds once the reconciler ran: what answered PENDING is settled, each PAID order charged once at the provider too', async () => {
    const cards = { ...DEFAULT_CARDS, others: { pm_card_visa__lost502: 0.3 } };
    // The 3-D Secure customers finish in the stub, as Stripe.js's page would at Stripe.
    const authenticate = async (clientSecret: string, result: 'succeed' | 'fail') =>
      stub.authenticate(clientSecret.split('_secret_')[0]!, result);
    const result = await runCheckoutLoad(backend, 'stub', { cards, reconcileWaitMs: 30_000, authenticate });
    expect(result.outcomes['PENDING'] ?? 0).toBeGreaterThan(0);
    expect(result.violations, JSON.stringify(result.checks)).toEqual([]);
    const { rows } = await backend.sql.query<{ id: string }>("select id from orders where tenant_id = 'checkout-stub' and status = 'PAID'");
    const charged = stub.charges.filter((charge) => charge.tenantId === 'checkout-stub').map((charge) => charge.orderId);
    expect(charged.sort()).toEqual(rows.map((row) => row.id).sort());
  });
});
