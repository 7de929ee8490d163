import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileDeps } from '../src/entry/worker/index.js';
import { FAULT_SETTINGS, runFaultScenario, STUB_SLOW_MS, stubPayments, TEST_STRIPE_KEY } from './support/checkout-run.js';
import { createTenant, serveTestBackend, type ServedBackend } from './support/harness.js';
import { startStripeStub, type StripeStub } from './support/stripe-stub.js';

// Checkouts released together against a Stripe stub that loses answers the ways a network does
// (slow past the timeout, a 502 or a reset after the charge, a 5xx before it, a 409 while the
// first request is in flight), coupons raced for, keyed resends; then the reconciler. The tables
// and the stub's own ledger are counted with SQL and the stub's charges, not read off the answers.
// test/checkout.naive.test.ts runs the same against the naive twins.

/** TRY_AGAIN reasons of a request that waited on another's lock or turn: a busy machine's, never the provider's. */
const WAITING_ON_ANOTHER = ['busy', 'pool', 'shed', '55P03', '40001', '40P01'];

describe('checkout when the payment provider loses answers', () => {
  let stub: StripeStub;
  let backend: ServedBackend;
  beforeAll(async () => {
    stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY, slowMs: STUB_SLOW_MS });
    backend = await serveTestBackend({ env: stubPayments(stub, FAULT_SETTINGS) });
  });
  afterAll(async () => {
    await backend.close();
    await stub.close();
  });

  it('answers every request by its deadline, never charges twice or without a PAID order, and the reconciler settles everything', async ({
    annotate,
  }) => {
    const tenantId = 'faults';
    await createTenant(backend, tenantId, 10_000_000);
    const result = await runFaultScenario(backend, stub, {
      tenantId,
      members: 28,
      reconcile: () => backend.services.checkout.reconcile(reconcileDeps(backend.services)!),
    });
    await annotate(`split checkout under faults: ${JSON.stringify(result)}`);
    // Nothing the provider does is an error: an unknown outcome is PENDING. On a busy machine a
    // request waiting on another's row (the same coupon, the same key) may run out of turns or lock
    // waits and answer TRY_AGAIN, having written nothing; nothing else may.
    const statuses = Object.keys(result.answers).filter((status) => status !== 'TRY_AGAIN');
    expect(statuses.sort()).toEqual(['COUPON_UNAVAILABLE', 'DECLINED', 'PAID', 'PENDING']);
    expect(Object.keys(result.tryAgainReasons).filter((reason) => !WAITING_ON_ANOTHER.includes(reason))).toEqual([]);
    expect(result.slowestMs).toBeLessThan(backend.config.requests.deadlineMs);
    expect(result.contradictions).toEqual([]);
    expect(result.violationsAnswered).toEqual([]);
    expect(result.violationsSettled).toEqual([]);
  });
});
