import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordDeclined, recordPaid } from '../src/features/checkout/record.js';
import { mutate, type Transport } from '../src/client/mutate.js';
import { runInTransaction } from '../src/db/transaction.js';
import { DEMO_HEADERS, graphiqlOptions } from '../src/http/graphiql.js';
import { reconcileDeps } from '../src/entry/worker/index.js';
import {
  CheckoutDocument,
  CreateCampaignDocument,
  MyCouponsDocument,
  OrderDocument,
  OrdersDocument,
  RedeemCouponDocument,
  type CheckoutInput,
} from './generated/graphql.js';
import { checkoutViolations, issueCoupons, readCheckoutTables, stubPayments } from './support/checkout-run.js';
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
import { captureLog } from './support/log-capture.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Checkout one request at a time, against a stub that speaks Stripe's API: what each answer
// wrote, counted with SQL, and what the provider was sent, read from the stub's own ledger.

const TENANT = 'checkout';

describe('checkout, one request at a time', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  const fetch = (request: Request) => backend.app.fetch(request);
  const checkout = (input: CheckoutInput, member = 'alice', headers: Record<string, string> = {}, tenantId = TENANT) =>
    gql(fetch, CheckoutDocument, { input }, { ...asUser(tenantId, member), ...headers });
  /** A 500-yen coupon of the member's own: every test uses members of its own, in any order. */
  const couponOf = async (member: string, tenantId = TENANT) =>
    (await issueCoupons(backend, tenantId, `coupon-of-${member}`, 500, [member]))[0]!;

  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub) });
    await createTenant(backend, TENANT, 1_000_000);
    await createTenant(backend, 'other-shop', 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('PAID: one charge of amount less the coupon, sent as Stripe expects; the coupon redeemed, one event of each', async () => {
    const coupon = await couponOf('alice');
    const response = await checkout({ amountYen: 1_800, couponId: coupon, paymentMethod: 'pm_card_visa' });
    const answer = response.body.data!.checkout;
    expect(answer.status).toBe('PAID');
    const order = answer.order!;
    expect(order).toMatchObject({ memberId: 'alice', status: 'PAID', amountYen: 1_800, discountYen: 500, dueYen: 1_300, paidYen: 1_300 });
    expect(order.couponId).toBe(coupon);
    const charge = stub.charges.find((c) => c.orderId === order.id)!;
    expect(charge).toMatchObject({ amountYen: 1_300, currency: 'jpy', paymentMethod: 'pm_card_visa', tenantId: TENANT });
    expect(order.paymentIntentId).toBe(charge.intentId);
    expect(charge.idempotencyKey).toBe(`checkout-${order.id}`);
    expect(stub.lastBody(charge.idempotencyKey)).toMatchObject({
      confirm: 'true',
      'automatic_payment_methods[enabled]': 'true',
      'automatic_payment_methods[allow_redirects]': 'never',
      'metadata[order_id]': order.id,
    });
    // A card that asks for 3-D Secure answers requires_action, which the customer's browser finishes.
    expect(stub.lastBody(charge.idempotencyKey)).not.toHaveProperty('error_on_requires_action');
    const tables = await readCheckoutTables(backend.sql, TENANT);
    expect(tables.events.get(order.id)).toEqual(
      new Map([
        ['order.created', 1],
        ['order.paid', 1],
      ]),
    );
    expect(tables.couponRedeemed.get(coupon)).toBe(1);
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'alice'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('REDEEMED');
    const audit = await backend.sql.query("select entity_ids from audit_log where tenant_id = $1 and operation = 'checkout'", [TENANT]);
    expect(audit.rows.map((row) => row.entity_ids)).toContainEqual([order.id, coupon]);
  });

  it('DECLINED: the order CANCELED, its coupon given back, no charge, one order.canceled event', async () => {
    const coupon = await couponOf('bob');
    const before = stub.charges.length;
    const answer = (await checkout({ amountYen: 900, couponId: coupon, paymentMethod: 'pm_card_chargeDeclined' }, 'bob')).body.data!
      .checkout;
    expect(answer.status).toBe('DECLINED');
    expect(answer.order).toMatchObject({ status: 'CANCELED', dueYen: 400, paidYen: 0, failureCode: 'generic_decline' });
    expect(stub.charges.length).toBe(before);
    const tables = await readCheckoutTables(backend.sql, TENANT);
    expect(tables.events.get(answer.order!.id)!.get('order.canceled')).toBe(1);
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'bob'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
    // The coupon given back pays a later order.
    expect((await checkout({ amountYen: 900, couponId: coupon, paymentMethod: 'pm_card_visa' }, 'bob')).body.data!.checkout.status).toBe(
      'PAID',
    );
  });

  it('COUPON_UNAVAILABLE for a coupon held, redeemed, voided or not yours: nothing written, nobody called', async () => {
    const [carol, dave, erin, redeemed] = [
      await couponOf('carol'),
      await couponOf('dave'),
      await couponOf('erin'),
      await couponOf('heidi'),
    ];
    await gqlOk(fetch, RedeemCouponDocument, { input: { couponId: redeemed } }, asUser(TENANT, 'heidi'));
    const held = stub.hold();
    const pending = checkout({ amountYen: 2_000, couponId: carol, paymentMethod: 'pm_card_visa' }, 'carol');
    await held.arrived;
    const countRows = async () =>
      (
        await backend.sql.query(
          `select (select count(*) from orders where tenant_id = $1)::int as orders, (select count(*) from outbox_events where tenant_id = $1)::int as events,
                  (select count(*) from audit_log where tenant_id = $1)::int as audit, (select count(*) from idempotency_keys where tenant_id = $1)::int as keys`,
          [TENANT],
        )
      ).rows[0];
    const before = { rows: await countRows(), requests: stub.requests.length };
    await backend.sql.query('update coupons set voided_at = now() where tenant_id = $1 and id = $2', [TENANT, dave]);
    const refusals = [
      await checkout({ amountYen: 2_000, couponId: carol, paymentMethod: 'pm_card_visa' }, 'carol', { 'idempotency-key': 'held-1' }),
      await checkout({ amountYen: 2_000, couponId: redeemed, paymentMethod: 'pm_card_visa' }, 'heidi'),
      await checkout({ amountYen: 2_000, couponId: dave, paymentMethod: 'pm_card_visa' }, 'dave'),
      await checkout({ amountYen: 2_000, couponId: erin, paymentMethod: 'pm_card_visa' }, 'frank'),
      await checkout({ amountYen: 2_000, couponId: '00000000-0000-4000-8000-000000000000', paymentMethod: 'pm_card_visa' }, 'frank'),
    ];
    for (const refusal of refusals)
      expect(refusal.body.data!.checkout).toEqual({ status: 'COUPON_UNAVAILABLE', order: null, clientSecret: null });
    expect({ rows: await countRows(), requests: stub.requests.length }).toEqual(before);
    // A held coupon is not redeemed either; the pending order then pays and redeems it.
    const redeem = await gqlOk(fetch, RedeemCouponDocument, { input: { couponId: carol } }, asUser(TENANT, 'carol'));
    expect(redeem.redeemCoupon).toMatchObject({ status: 'HELD', redeemedAt: null, coupon: { status: 'HELD' } });
    held.proceed();
    expect((await pending).body.data!.checkout.status).toBe('PAID');
  });

  it('nothing to charge when the coupon covers the price: PAID at once, nobody called', async () => {
    const coupon = await couponOf('grace');
    const requests = stub.requests.length;
    const answer = (await checkout({ amountYen: 300, couponId: coupon, paymentMethod: 'pm_card_visa' }, 'grace')).body.data!.checkout;
    expect(answer).toMatchObject({
      status: 'PAID',
      order: { amountYen: 300, discountYen: 500, dueYen: 0, paidYen: 0, paymentIntentId: null },
    });
    expect(stub.requests.length).toBe(requests);
    const tables = await readCheckoutTables(backend.sql, TENANT);
    expect(tables.events.get(answer.order!.id)!.get('order.paid')).toBe(1);
    expect(tables.couponRedeemed.get(coupon)).toBe(1);
  });

  it("a charge below the provider's 50-yen minimum is BAD_USER_INPUT before anything is written, nobody called", async () => {
    const coupon = await couponOf('below-minimum');
    const requests = stub.requests.length;
    const countOrders = async () =>
      (await backend.sql.query('select count(*)::int as n from orders where member_id = $1', ['below-minimum'])).rows[0].n;
    const response = await checkout({ amountYen: 520, couponId: coupon, paymentMethod: 'pm_card_visa' }, 'below-minimum');
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    expect(response.body.errors![0]!.message).toMatch(/leaves 20 yen to charge; the payment provider charges 50 yen at least/);
    expect(errorCodes(await checkout({ amountYen: 49, paymentMethod: 'pm_card_visa' }, 'below-minimum'))).toEqual(['BAD_USER_INPUT']);
    expect(stub.requests.length).toBe(requests);
    expect(await countOrders()).toBe(0);
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'below-minimum'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
    // 50 yen, and a coupon that covers all (nothing to charge), are both fine.
    expect(
      (await checkout({ amountYen: 550, couponId: coupon, paymentMethod: 'pm_card_visa' }, 'below-minimum')).body.data!.checkout.status,
    ).toBe('PAID');
  });

  it('a payment method the provider does not have (its 400) is DECLINED for good: the order CANCELED, the coupon given back', async () => {
    const coupon = await couponOf('missing-method');
    const answer = (await checkout({ amountYen: 900, couponId: coupon, paymentMethod: 'pm_does_not_exist' }, 'missing-method')).body.data!
      .checkout;
    expect(answer).toMatchObject({ status: 'DECLINED', order: { status: 'CANCELED' } });
    const intent = await backend.sql.query('select status, decline_code from payment_intents where order_id = $1', [answer.order!.id]);
    expect(intent.rows[0]).toEqual({ status: 'declined', decline_code: 'resource_missing' });
    const mine = await gqlOk(fetch, MyCouponsDocument, {}, asUser(TENANT, 'missing-method'));
    expect(mine.myCoupons.find((c) => c.id === coupon)!.status).toBe('AVAILABLE');
  });

  it('a keyed resend of a payment older than PAYMENTS_RECONCILE_FOR asks nobody: the provider may have forgotten the key', async () => {
    const input = { amountYen: 1_000, paymentMethod: 'pm_card_visa__error500_3' };
    const first = (await checkout(input, 'old-resend', { 'idempotency-key': 'old-1' })).body.data!.checkout;
    expect(first.status).toBe('PENDING');
    const requests = stub.requests.length;
    await backend.sql.query("update payment_intents set created_at = now() - interval '2 days' where order_id = $1", [first.order!.id]);
    const again = await checkout(input, 'old-resend', { 'idempotency-key': 'old-1' });
    expect(again.body.data!.checkout).toMatchObject({ status: 'PENDING', order: { id: first.order!.id, status: 'PENDING_PAYMENT' } });
    expect(stub.requests.length).toBe(requests);
    // Within the limit, the same resend asks again (and the provider's answer settles it).
    await backend.sql.query('update payment_intents set created_at = now() where order_id = $1', [first.order!.id]);
    await checkout(input, 'old-resend', { 'idempotency-key': 'old-1' });
    expect(stub.requests.length).toBe(requests + 1);
  });

  it('a resend with the same Idempotency-Key is the same order and the same charge; another request under the key is refused', async () => {
    const input = { amountYen: 1_200, paymentMethod: 'pm_card_visa' };
    const first = await checkout(input, 'keyed', { 'idempotency-key': 'keyed-1' });
    const again = await checkout(input, 'keyed', { 'idempotency-key': 'keyed-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data!.checkout).toEqual(first.body.data!.checkout);
    const orderId = first.body.data!.checkout.order!.id;
    expect(stub.charges.filter((c) => c.orderId === orderId)).toHaveLength(1);
    expect(errorCodes(await checkout({ ...input, amountYen: 1_300 }, 'keyed', { 'idempotency-key': 'keyed-1' }))).toEqual([
      'IDEMPOTENCY_KEY_REUSED',
    ]);
  });

  it('order and orders: a member sees its own, the tenant’s admin every order of the tenant, another tenant none', async () => {
    for (const [member, amountYen] of [
      ['ivan', 100],
      ['ivan', 200],
      ['judy', 300],
      ['mallory', 400],
    ] as const) {
      expect((await checkout({ amountYen, paymentMethod: 'pm_card_visa' }, member)).body.data!.checkout.status).toBe('PAID');
    }
    const mine = await gqlOk(fetch, OrdersDocument, {}, asUser(TENANT, 'ivan'));
    expect(mine.orders.map((o) => o.amountYen)).toEqual([200, 100]);
    expect(new Set(mine.orders.map((o) => o.memberId))).toEqual(new Set(['ivan']));
    const times = mine.orders.map((o) => o.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    const all = await gqlOk(fetch, OrdersDocument, { first: 400 }, asTenantAdmin(TENANT));
    expect(new Set(all.orders.map((o) => o.memberId)).size).toBeGreaterThan(2);
    const someone = all.orders.find((o) => o.memberId === 'judy')!;
    expect((await gqlOk(fetch, OrderDocument, { id: someone.id }, asUser(TENANT, 'judy'))).order).toEqual(someone);
    expect((await gqlOk(fetch, OrderDocument, { id: someone.id }, asUser(TENANT, 'ivan'))).order).toBeNull();
    expect((await gqlOk(fetch, OrderDocument, { id: someone.id }, asTenantAdmin('other-shop'))).order).toBeNull();
    expect(errorCodes(await gql(fetch, OrdersDocument, { first: 501 }, asUser(TENANT, 'ivan')))).toEqual(['BAD_USER_INPUT']);
  });

  it('refuses bad input before anything is written, and anyone but a member', async () => {
    for (const input of [
      { amountYen: 0, paymentMethod: 'pm_card_visa' },
      { amountYen: 100_000_000, paymentMethod: 'pm_card_visa' },
      { amountYen: 100, paymentMethod: '' },
      { amountYen: 100, paymentMethod: 'pm card visa' },
    ]) {
      expect(errorCodes(await checkout(input))).toEqual(['BAD_USER_INPUT']);
    }
    expect(
      errorCodes(await gql(fetch, CheckoutDocument, { input: { amountYen: 100, paymentMethod: 'pm_card_visa' } }, asTenantAdmin(TENANT))),
    ).toEqual(['FORBIDDEN']);
  });

  it("GraphiQL's walkthrough runs Checkout and MyOrders as they stand, for the demo member", async () => {
    await createTenant(backend, 'acme', 1_000_000);
    const page = graphiqlOptions(backend.config);
    const run = async (operationName: string) => {
      const response = await fetch(
        new Request('http://test.local/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...DEMO_HEADERS },
          body: JSON.stringify({ query: page ? page.defaultQuery : '', operationName }),
        }),
      );
      return (await response.json()) as { data?: Record<string, { status?: string } & unknown[]>; errors?: unknown[] };
    };
    const bought = await run('Checkout');
    expect(bought.errors).toBeUndefined();
    expect(bought.data!['checkout']!.status).toBe('PAID');
    const listed = await run('MyOrders');
    expect(listed.errors).toBeUndefined();
    expect(listed.data!['orders']!.length).toBeGreaterThan(0);
  });

  it('through the typed client: a PENDING answer resent with its key, once settled, answers PAID for the same order and charge', async () => {
    const transport: Transport = async (url, init) => {
      const response = await backend.app.fetch(new Request(url, { method: 'POST', headers: init.headers, body: init.body }));
      return { status: response.status, headers: response.headers, body: await response.json() };
    };
    const send = () =>
      mutate(
        CheckoutDocument,
        { input: { amountYen: 2_500, paymentMethod: 'pm_card_visa__reset' } },
        { url: 'http://test.local/graphql', headers: asUser(TENANT, 'typed'), idempotencyKey: 'typed-1', transport },
      );
    const first = await send();
    expect(first.data.checkout.status).toBe('PENDING');
    const orderId = first.data.checkout.order!.id;
    await backend.sql.query('update payment_intents set next_attempt_at = now() where tenant_id = $1 and order_id = $2', [TENANT, orderId]);
    await backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    const again = await send();
    expect(again).toMatchObject({ replayed: true, data: { checkout: { status: 'PAID', order: { id: orderId, status: 'PAID' } } } });
    expect(stub.charges.filter((charge) => charge.orderId === orderId)).toHaveLength(1);
  });

  it('the first writer of an outcome wins: a late answer and the reconciler racing agree, and neither overwrites the other', async () => {
    // A tenant of its own: the outcome recorded here contradicts the stub's charge on purpose.
    const race = 'checkout-race';
    await createTenant(backend, race, 1_000_000);
    const coupon = await couponOf('racer', race);
    const input = { amountYen: 1_500, couponId: coupon, paymentMethod: 'pm_card_visa__lost502' };
    const answer = (await checkout(input, 'racer', {}, race)).body.data!.checkout;
    const orderId = answer.order!.id;
    const inTransaction = <T>(work: Parameters<typeof runInTransaction<T>>[3]) =>
      runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + 5_000 }, work).then((run) => run.value);
    const [paid, declined] = await Promise.all([
      inTransaction((trx) => recordPaid(trx, { tenantId: race, orderId, intentId: 'pi_first', now: new Date() })),
      inTransaction((trx) =>
        recordDeclined(trx, { tenantId: race, orderId, intentId: 'pi_second', failureCode: 'generic_decline', now: new Date() }),
      ),
    ]);
    // Whichever committed first, both answer its outcome.
    expect(paid).toEqual(declined);
    expect(['PAID', 'CANCELED']).toContain(paid.status);
    const tables = await readCheckoutTables(backend.sql, race);
    const topics = tables.events.get(orderId)!;
    expect((topics.get('order.paid') ?? 0) + (topics.get('order.canceled') ?? 0)).toBe(1);
    expect(tables.heldCoupons.some((held) => held.id === coupon)).toBe(false);
    expect(tables.redeemedCoupons.has(coupon)).toBe(paid.status === 'PAID');
  });

  it('is a Hasura action like the others', async () => {
    const response = await callAction(
      fetch,
      'checkout',
      { amountYen: 700, paymentMethod: 'pm_card_visa' },
      { 'x-hasura-role': 'user', 'x-hasura-tenant-id': TENANT, 'x-hasura-user-id': 'oscar' },
    );
    expect(response.status).toBe(200);
    const body = (await response.json()) as { status: string; order: { dueYen: number } };
    expect(body).toMatchObject({ status: 'PAID', order: { dueYen: 700 } });
  });

  it('a lost answer is PENDING, not an error; the reconciler resends the same request and settles it to the one charge', async () => {
    const answer = (await checkout({ amountYen: 1_000, paymentMethod: 'pm_card_visa__lost502' }, 'peggy')).body.data!.checkout;
    expect(answer).toMatchObject({ status: 'PENDING', order: { status: 'PENDING_PAYMENT', paymentIntentId: null } });
    const orderId = answer.order!.id;
    expect(stub.charges.filter((c) => c.orderId === orderId)).toHaveLength(1);
    await backend.sql.query('update payment_intents set next_attempt_at = now() where tenant_id = $1 and order_id = $2', [TENANT, orderId]);
    const pass = await backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
    expect(pass).toMatchObject({ resent: 1, paid: 1 });
    const settled = await gqlOk(fetch, OrderDocument, { id: orderId }, asUser(TENANT, 'peggy'));
    expect(settled.order).toMatchObject({ status: 'PAID', paymentIntentId: stub.charges.find((c) => c.orderId === orderId)!.intentId });
    expect(stub.charges.filter((c) => c.orderId === orderId)).toHaveLength(1);
    expect(checkoutViolations(await readCheckoutTables(backend.sql, TENANT), stub, TENANT, false)).toEqual([]);
  });
});

describe('checkout with a key the provider refuses', () => {
  it('lets nothing of the answer reach a client or a log as a secret or a stack: PENDING, and the reason by type and status only', async () => {
    const stub = await startStripeStub({ secretKey: 'sk_test_the_right_one' });
    const wrongKey = 'sk_test_a_wrong_key_that_must_not_leak';
    const { lines, logger } = captureLog('debug');
    const backend = await createTestBackend({ env: { STRIPE_SECRET_KEY: wrongKey, STRIPE_API_URL: stub.url }, log: logger });
    try {
      await createTenant(backend, 'refused-key', 1_000_000);
      const response = await gql(
        (request: Request) => backend.app.fetch(request),
        CheckoutDocument,
        { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } },
        asUser('refused-key', 'alice'),
      );
      expect(response.body.data!.checkout.status).toBe('PENDING');
      await backend.sql.query("update payment_intents set next_attempt_at = now() where tenant_id = 'refused-key'");
      expect(await backend.services.checkout.reconcile(reconcileDeps(backend.services)!)).toMatchObject({
        resent: 1,
        unknown: 1,
      });
      const logged = JSON.stringify(lines);
      const stored = JSON.stringify(
        (await backend.sql.query("select last_error from payment_intents where tenant_id = 'refused-key'")).rows,
      );
      for (const text of [response.text, logged, stored]) {
        expect(text).not.toContain(wrongKey);
        expect(text).not.toMatch(/auth\.rb|\n\s+at /);
      }
      expect(logged).toContain('HTTP 401');
      expect(stored).toContain('HTTP 401');
    } finally {
      await backend.close();
      await stub.close();
    }
  });
});

describe('checkout without STRIPE_SECRET_KEY', () => {
  it('in development: the simulated provider pays pm_card_visa and declines pm_card_chargeDeclined', async () => {
    const backend = await createTestBackend();
    try {
      await createTenant(backend, 'simulated', 1_000_000);
      const pay = (paymentMethod: string) =>
        gqlOk(
          (request: Request) => backend.app.fetch(request),
          CheckoutDocument,
          { input: { amountYen: 1_000, paymentMethod } },
          asUser('simulated'),
        );
      const paid = (await pay('pm_card_visa')).checkout;
      expect(paid).toMatchObject({ status: 'PAID', order: { status: 'PAID', paymentIntentId: expect.stringMatching(/^pi_sim_/) } });
      expect((await pay('pm_card_chargeDeclined')).checkout).toMatchObject({ status: 'DECLINED', order: { status: 'CANCELED' } });
    } finally {
      await backend.close();
    }
  });

  it("in development: GraphiQL's 3-D Secure walkthrough runs as written, the authentication finished on the development page", async () => {
    const backend = await createTestBackend();
    try {
      await createTenant(backend, 'acme', 1_000_000);
      const fetch = (request: Request) => backend.app.fetch(request);
      const page = graphiqlOptions(backend.config);
      const run = async (operationName: string, variables: Record<string, unknown> = {}) => {
        const response = await fetch(
          new Request('http://test.local/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...DEMO_HEADERS },
            body: JSON.stringify({ query: page ? page.defaultQuery : '', operationName, variables }),
          }),
        );
        return (await response.json()) as {
          data: Record<string, { status: string; clientSecret?: string; order: { id: string; status: string } }>;
        };
      };
      const pay = async (result: 'succeed' | 'fail') => {
        const asked = (await run('CheckoutWith3DS')).data['checkout']!;
        expect(asked).toMatchObject({ status: 'REQUIRES_ACTION', clientSecret: expect.stringMatching(/^pi_sim_\w+_secret_\w+$/) });
        const challenge = await fetch(new Request(`http://test.local/dev/authenticate?client_secret=${asked.clientSecret}`));
        expect(challenge.status).toBe(200);
        expect(await challenge.text()).toContain('Complete authentication');
        const form = new URLSearchParams({ client_secret: asked.clientSecret!, result });
        const finished = await fetch(new Request('http://test.local/dev/authenticate', { method: 'POST', body: form }));
        expect(finished.status).toBe(200);
        return (await run('ConfirmCheckout', { orderId: asked.order.id })).data['confirmCheckout']!;
      };
      expect(await pay('succeed')).toMatchObject({ status: 'PAID', order: { status: 'PAID' } });
      expect(await pay('fail')).toMatchObject({
        status: 'DECLINED',
        order: { status: 'CANCELED', failureCode: 'payment_intent_authentication_failure' },
      });
      const finishedTwice = await fetch(
        new Request('http://test.local/dev/authenticate?client_secret=pi_sim_000000000000000000000000_secret_000000000000000000000000'),
      );
      expect(finishedTwice.status).toBe(404);
      expect(await finishedTwice.text()).toContain('No payment waits for this client secret');
      // Opened by hand, without the secret: the page says where the secret comes from.
      const openedByHand = await fetch(new Request('http://test.local/dev/authenticate'));
      expect(openedByHand.status).toBe(404);
      expect(await openedByHand.text()).toContain('?client_secret=</code> followed by the <code>clientSecret</code>');
    } finally {
      await backend.close();
    }
  });

  it('in production: PAYMENTS_UNAVAILABLE (422 on /actions), with nothing written', async () => {
    const secret = 'checkout-test-secret-0123456789';
    const backend = await createTestBackend({ env: { NODE_ENV: 'production', ACTION_SECRET: secret } });
    try {
      await createTenant(backend, 'no-key', 1_000_000);
      const headers = { ...asUser('no-key'), 'x-action-secret': secret };
      const fetch = (request: Request) => backend.app.fetch(request);
      const refused = await gql(fetch, CheckoutDocument, { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } }, headers);
      expect(errorCodes(refused)).toEqual(['PAYMENTS_UNAVAILABLE']);
      expect(refused.body.errors![0]!.message).toMatch(/no payment provider configured \(STRIPE_SECRET_KEY\)/);
      const action = await callAction(fetch, 'checkout', { amountYen: 1_000, paymentMethod: 'pm_card_visa' }, asUser('no-key'), {
        'x-action-secret': secret,
      });
      expect(action.status).toBe(422);
      const written = await backend.sql.query(
        "select (select count(*) from orders where tenant_id = 'no-key')::int + (select count(*) from audit_log where tenant_id = 'no-key')::int as n",
      );
      expect(written.rows[0].n).toBe(0);
    } finally {
      await backend.close();
    }
  });
});

describe('Coupon.status', () => {
  it("issueCoupon's coupon comes with its status, read by the issue's own statement: AVAILABLE, REDEEMED, HELD, EXPIRED, with no statement more", async () => {
    let statements = 0;
    const backend = await createTestBackend({ onStatement: () => statements++ });
    try {
      await createTenant(backend, 'status', 1_000_000);
      const fetch = (request: Request) => backend.app.fetch(request);
      await gqlOk(
        fetch,
        CreateCampaignDocument,
        { input: { id: 'st', name: 'st', discountYen: 100, budgetYen: 10_000 } },
        asTenantAdmin('status'),
      );
      const issue = async (member: string, withStatus: boolean, key?: string) => {
        const before = statements;
        const query = `mutation { issueCoupon(input: { campaignId: "st" }) { status coupon { id ${withStatus ? 'status' : ''} } } }`;
        const data = await gqlOk<{ issueCoupon: { status: string; coupon: { id: string; status?: string } } }, Record<string, never>>(
          fetch,
          query,
          {},
          { ...asUser('status', member), ...(key ? { 'idempotency-key': key } : {}) },
        );
        return { ...data.issueCoupon, statements: statements - before };
      };
      const plain = await issue('a', false);
      const withStatus = await issue('b', true);
      expect(withStatus).toMatchObject({ status: 'ISSUED', coupon: { status: 'AVAILABLE' } });
      expect(withStatus.statements).toBe(plain.statements);
      await gqlOk(
        fetch,
        CheckoutDocument,
        { input: { amountYen: 1_000, couponId: withStatus.coupon.id, paymentMethod: 'pm_card_visa' } },
        asUser('status', 'b'),
      );
      // ALREADY_ISSUED: the status of the coupon the statement found, in the same statement.
      const alreadyIssued = await issue('b', false);
      const redeemed = await issue('b', true);
      expect(redeemed).toMatchObject({ status: 'ALREADY_ISSUED', coupon: { status: 'REDEEMED' } });
      expect(redeemed.statements).toBe(alreadyIssued.statements);
      await backend.sql.query("update coupons set held_by_order_id = gen_random_uuid() where tenant_id = 'status' and member_id = 'a'");
      const myStatus = async (member: string) => (await gqlOk(fetch, MyCouponsDocument, {}, asUser('status', member))).myCoupons[0]!.status;
      expect(await myStatus('a')).toBe('HELD');
      // A replay's stored answer keeps no status (it changes with time): the replay reads today's.
      expect(await issue('e', true, 'k-e')).toMatchObject({ status: 'ISSUED', coupon: { status: 'AVAILABLE' } });
      await backend.sql.query("update coupons set held_by_order_id = gen_random_uuid() where tenant_id = 'status' and member_id = 'e'");
      expect(await issue('e', true, 'k-e')).toMatchObject({ status: 'ISSUED', coupon: { status: 'HELD' } });
      const held = await issue('a', true);
      expect(held).toMatchObject({ status: 'ALREADY_ISSUED', coupon: { status: 'HELD' } });
      expect(held.statements).toBe(alreadyIssued.statements);
      // Past the campaign's couponsExpireAt (still open for issues): what myCoupons reads, for a coupon issued now and one issued before.
      await backend.sql.query(
        "update campaigns set starts_at = now() - interval '2 minutes', coupons_expire_at = now() - interval '1 minute' where tenant_id = 'status' and id = 'st'",
      );
      const issuedExpired = await issue('c', true);
      expect(issuedExpired).toMatchObject({ status: 'ISSUED', coupon: { status: 'EXPIRED' } });
      expect(issuedExpired.statements).toBe(plain.statements);
      expect(await myStatus('c')).toBe('EXPIRED');
      expect((await issue('c', true)).coupon.status).toBe('EXPIRED');
      expect((await issue('a', true)).coupon.status).toBe('HELD');
    } finally {
      await backend.close();
    }
  });
});
