import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stubPayments } from './support/checkout-run.js';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { runRefundRace } from './support/refund-race.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Every way this server learns of a refund, released together (test/support/refund-race.ts):
// Stripe's refund events three times each and in reverse, keyed resends of refunds whose answer
// was lost, new refunds, and the reconciler's resends and sweep. Each Stripe refund is recorded
// once by its id, refundedYen is Stripe's, one order.refunded per refund, and every wholly
// refunded order gives its coupon back. test/checkout.refunds.naive.test.ts runs the same race with
// refunds counted from the event's body and fails it.

const SECRET = 'whsec_test_refund_race_0123456789ab';
const ORDERS = 8;

describe('refunds learnt from every side at once', () => {
  let stub: StripeStub;
  let backend: TestBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: 'sk_test_checkout_0123456789' });
    backend = await createTestBackend({ env: stubPayments(stub, { STRIPE_WEBHOOK_SECRET: SECRET }) });
    stub.webhooks.sendTo((request) => backend.app.fetch(request), SECRET);
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('record each Stripe refund once, whoever learns of it first', async ({ annotate }) => {
    const result = await runRefundRace(backend, stub, 'refund-race', ORDERS);
    await annotate(`refund race: ${JSON.stringify(result)}`);
    expect(result.violations).toEqual([]);
    expect(result.statuses).toEqual({ REFUNDED: ORDERS });
    expect(result.refundsAtProvider).toBe(3 * ORDERS);
    expect(result.refundsRecorded).toBe(3 * ORDERS);
    expect(result.couponsRedeemed).toBe(0);
  });
});
