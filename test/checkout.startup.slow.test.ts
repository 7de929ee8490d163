import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, type TestBackend } from './support/harness.js';
import { captureOutput, spawnScript, stopScript } from './support/scripts.js';
import { waitFor } from './support/wait.js';

// What `npm start` says of its payment provider: the simulated one in development without a key,
// none in production without one (and checkout then refused: test/checkout.test.ts). Slow: each
// case starts the server as its own process.

describe('the payment provider at start-up', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  const started = async (env: Record<string, string>) => {
    const child = spawnScript('src/entry/main.ts', {
      DATABASE_URL: backend.databaseUrl,
      RUN_WORKERS: 'false',
      PORT: '0',
      ...env,
    });
    const output = captureOutput(child);
    try {
      await waitFor(() => (/Payments: +.*\n/.test(output()) ? true : undefined), 'the banner', 240_000);
      return output();
    } finally {
      await stopScript(child);
    }
  };

  it('development without STRIPE_SECRET_KEY: the simulated provider, named in the banner and the log', async () => {
    const output = await started({ NODE_ENV: 'development' });
    expect(output).toMatch(/Payments: +simulated \(no STRIPE_SECRET_KEY\): pm_card_visa pays, pm_card_chargeDeclined is declined/);
    expect(output).toMatch(/"msg":"payments: simulated .*set STRIPE_SECRET_KEY to use Stripe"/);
  });

  it('production without STRIPE_SECRET_KEY: an error line at start-up, and the banner says checkout is refused', async () => {
    const output = await started({ NODE_ENV: 'production', ACTION_SECRET: 'startup-test-secret-0123456789', HOST: '127.0.0.1' });
    expect(output).toMatch(/"level":"error".*"msg":"payments: STRIPE_SECRET_KEY is not set, so checkout is refused/);
    expect(output).toMatch(/Payments: +none: checkout answers PAYMENTS_UNAVAILABLE until STRIPE_SECRET_KEY is set/);
  });

  it('with a key: Stripe, and the key itself nowhere in what the server prints', async () => {
    const key = 'sk_test_startup_key_that_stays_secret';
    const output = await started({ NODE_ENV: 'development', STRIPE_SECRET_KEY: key });
    expect(output).toMatch(/Payments: +Stripe at https:\/\/api\.stripe\.com \(test mode key\)/);
    expect(output).not.toContain(key);
  });
});
