import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { CheckoutDocument } from './generated/graphql.js';
import { issueCoupons, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { asUser, createTenant, createTestBackend, errorCodes, gql, gqlOk, type TestBackend } from './support/harness.js';
import { honestIntent, startHostileProvider, type HostileProvider, type HostileRequest } from './support/hostile-provider.js';
import { captureLog } from './support/log-capture.js';
import { waitFor } from './support/wait.js';

// A provider that speaks Stripe's protocol and lies (test/support/hostile-provider.ts): every
// PaymentIntent it makes up is checked against its order before anything is settled from it, an
// answer is read up to a limit of the server's own, and a call is given up, its socket closed, at
// its timeout. What does not match is set aside for an operator, counted on /metrics and logged
// once: never PAID, never a 500, never asked again. The 600 MB answer to a server process is in
// test/checkout.huge-answer.slow.test.ts.

const TENANT = 'hostile';
const OTHER = 'hostile-other';

describe('checkout against a provider that lies', () => {
  let hostile: HostileProvider;
  let backend: TestBackend;
  const log = captureLog('warn');
  const fetch = (request: Request) => backend.app.fetch(request);
  const checkout = (member: string, tenantId = TENANT, couponId: string | null = null) =>
    gql(fetch, CheckoutDocument, { input: { amountYen: 1_000, couponId, paymentMethod: 'pm_card_visa' } }, asUser(tenantId, member));
  const reconcile = async () => {
    await backend.sql.query("update payment_intents set next_attempt_at = now() where status = 'pending'");
    return backend.services.checkout.reconcile(reconcileDeps(backend.services)!);
  };

  /** payment_answers_refused_total{source="answer"}: other tests of the file count there too. */
  const refusedAnswers = async () => {
    const metrics = await (await fetch(new Request('http://test.local/metrics'))).text();
    return Number(/payment_answers_refused_total\{source="answer"\} (\d+)/.exec(metrics)?.[1] ?? 0);
  };

  beforeAll(async () => {
    hostile = await startHostileProvider();
    backend = await createTestBackend({
      env: { STRIPE_SECRET_KEY: TEST_STRIPE_KEY, STRIPE_API_URL: hostile.url, PAYMENTS_TIMEOUT_MS: '1000' },
      log: log.logger,
    });
    await createTenant(backend, TENANT, 1_000_000);
    await createTenant(backend, OTHER, 1_000_000);
  });
  afterAll(async () => {
    await backend.close();
    await hostile.close();
  });

  it('settles nothing from a PaymentIntent that does not match its order, or an id no table takes: set aside, counted, logged once', async ({
    annotate,
  }) => {
    hostile.answer = (request) => ({ kind: 'json', body: honestIntent(request) });
    const paidHere = (
      await gqlOk(fetch, CheckoutDocument, { input: { amountYen: 2_000, paymentMethod: 'pm_card_visa' } }, asUser(TENANT, 'first'))
    ).checkout.order!;
    const paidThere = (
      await gqlOk(fetch, CheckoutDocument, { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } }, asUser(OTHER, 'x'))
    ).checkout.order!;
    expect([paidHere.status, paidThere.status]).toEqual(['PAID', 'PAID']);
    const lies: [string, (request: HostileRequest) => Record<string, unknown>][] = [
      ['a success for 1 yen', (request) => honestIntent(request, { amount: 1 })],
      ['a success for 1,000 usd', (request) => honestIntent(request, { currency: 'usd' })],
      [
        "another tenant's order and PaymentIntent",
        (request) => honestIntent(request, { id: paidThere.paymentIntentId, metadata: { order_id: paidThere.id, tenant_id: OTHER } }),
      ],
      ['the PaymentIntent of another PAID order', (request) => honestIntent(request, { id: paidHere.paymentIntentId })],
      ['no id at all', (request) => honestIntent(request, { id: undefined })],
      ['a 300-character id', (request) => honestIntent(request, { id: `pi_${'a'.repeat(297)}` })],
      ['an empty id', (request) => honestIntent(request, { id: '' })],
      ['an id with a NUL', (request) => honestIntent(request, { id: 'pi_abc\u0000def' })],
    ];
    const [coupon] = await issueCoupons(backend, TENANT, 'lies', 300, ['liar-coupon']);
    const refusedBefore = await refusedAnswers();
    const answered: Record<string, unknown> = {};
    const orders: string[] = [];
    for (const [i, [label, lie]] of lies.entries()) {
      hostile.answer = (request) => ({ kind: 'json', body: lie(request) });
      const member = i === 0 ? 'liar-coupon' : `liar-${i}`;
      const response = await checkout(member, TENANT, i === 0 ? coupon! : null);
      answered[label] = response.body.data?.checkout.status ?? errorCodes(response);
      orders.push(response.body.data?.checkout.order?.id ?? 'none');
    }
    await annotate(`answers to each lie: ${JSON.stringify(answered)}`);
    expect(Object.values(answered)).toEqual(lies.map(() => 'PENDING'));
    const { rows } = await backend.sql.query(
      `select o.status, o.payment_intent_id, p.set_aside_at is not null as set_aside
         from orders o join payment_intents p on p.tenant_id = o.tenant_id and p.order_id = o.id where o.id = any($1)`,
      [orders],
    );
    expect(rows).toEqual(orders.map(() => ({ status: 'PENDING_PAYMENT', payment_intent_id: null, set_aside: true })));
    const held = await backend.sql.query('select held_by_order_id from coupons where tenant_id = $1 and id = $2', [TENANT, coupon]);
    expect(held.rows[0].held_by_order_id).toBe(orders[0]);
    const setAside = log.lines.filter(
      (line) => String(line['msg']).startsWith('payment set aside') && orders.includes(String(line['orderId'])),
    );
    expect(setAside.map((line) => line['orderId']).sort()).toEqual([...orders].sort());
    expect((await refusedAnswers()) - refusedBefore).toBe(lies.length);
    // Set aside: the reconciler asks about none of them again.
    const askedAbout = () => hostile.requests.filter((request) => orders.includes(request.fields['metadata[order_id]'] ?? '')).length;
    const asked = askedAbout();
    await reconcile();
    expect(askedAbout()).toBe(asked);
  });

  it('records from a list of refunds only what matches its order: not more than the charge, not another PaymentIntent, no id no table takes', async () => {
    hostile.answer = (request) => ({ kind: 'json', body: honestIntent(request) });
    const order = (
      await gqlOk(fetch, CheckoutDocument, { input: { amountYen: 2_000, paymentMethod: 'pm_card_visa' } }, asUser(TENANT, 'refunded'))
    ).checkout.order!;
    const theirs = (
      await gqlOk(fetch, CheckoutDocument, { input: { amountYen: 2_000, paymentMethod: 'pm_card_visa' } }, asUser(OTHER, 'y'))
    ).checkout.order!;
    const intent = (overrides: Record<string, unknown> = {}) => ({
      id: order.paymentIntentId,
      object: 'payment_intent',
      amount: 2_000,
      currency: 'jpy',
      status: 'succeeded',
      metadata: { order_id: order.id, tenant_id: TENANT },
      ...overrides,
    });
    const refund = (id: string, amount: unknown, paymentIntent: unknown) => ({
      id,
      object: 'refund',
      amount,
      status: 'succeeded',
      created: Math.floor(Date.now() / 1000),
      payment_intent: paymentIntent,
      metadata: {},
    });
    const lies = [
      refund('re_within', 100, intent()),
      refund('re_beyond', 5_000, intent()),
      refund(`re_${'a'.repeat(300)}`, 100, intent()),
      refund('re_fraction', 1.5, intent()),
      refund('re_one_yen_intent', 100, intent({ id: 'pi_hostileoneyen', amount: 1 })),
      refund('re_their_intent', 100, intent({ id: theirs.paymentIntentId })),
    ];
    hostile.answer = (request) =>
      request.path.startsWith('/v1/refunds')
        ? { kind: 'json', body: { object: 'list', data: lies, has_more: false } }
        : { kind: 'json', body: honestIntent(request) };
    await backend.sql.query('update refund_sweeps set next_sweep_at = now()');
    expect((await reconcile()).foundRefunds).toBe(1);
    const { rows } = await backend.sql.query('select status, refunded_yen from orders where id = any($1) order by tenant_id', [
      [order.id, theirs.id],
    ]);
    expect(rows).toEqual([
      { status: 'PAID', refunded_yen: 100 },
      { status: 'PAID', refunded_yen: 0 },
    ]);
    const recorded = await backend.sql.query('select provider_refund_id, amount_yen, origin from refunds where order_id = any($1)', [
      [order.id, theirs.id],
    ]);
    expect(recorded.rows).toEqual([{ provider_refund_id: 're_within', amount_yen: 100, origin: 'provider' }]);
    const refused = log.lines.filter((line) => String(line['msg']).startsWith('refunds: ') && line['orderId'] === order.id);
    expect(refused.length).toBeGreaterThan(0);
  });

  it('gives a call up at PAYMENTS_TIMEOUT_MS and closes its socket, against a provider trickling a byte at a time', async ({
    annotate,
  }) => {
    // Faster than the call's limit: the package's own timeout, an idle timer on the socket, never fires.
    hostile.answer = () => ({ kind: 'trickle', everyMs: 250 });
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => checkout(`trickled-${i}`)));
    expect(answers.map((answer) => answer.body.data?.checkout.status)).toEqual(answers.map(() => 'PENDING'));
    const orders = answers.map((answer) => answer.body.data!.checkout.order!.id);
    const askedAbout = () => hostile.requests.filter((request) => orders.includes(request.fields['metadata[order_id]'] ?? '')).length;
    await waitFor(() => (hostile.openSockets === 0 ? true : undefined), 'every socket to the provider closed');
    await reconcile();
    await waitFor(() => (hostile.openSockets === 0 ? true : undefined), "the reconciler's sockets closed");
    const metrics = await (await fetch(new Request('http://test.local/metrics'))).text();
    expect(metrics).toMatch(/payments_waiting\{pid="\d+"\} 0/);
    await annotate(`requests to the provider: ${askedAbout()} for 10 checkouts and one reconciler pass`);
    expect(askedAbout()).toBe(20);
  });
});
