import { bootstrap, onShutdown, run } from '../../src/process/bootstrap.js';
import { startBackend } from '../../src/entry/backend.js';
import { NAIVE_CHECKOUTS } from '../naive/checkout.js';

/** The server with the checkout named by CHECKOUT_ALGORITHM (`split`, or a naive twin): what the kill tests start and kill. */
run(async () => {
  const name = process.env['CHECKOUT_ALGORITHM'] ?? 'split';
  const checkout = NAIVE_CHECKOUTS[name];
  if (name !== 'split' && !checkout) {
    throw new Error(`CHECKOUT_ALGORITHM must be split or one of ${Object.keys(NAIVE_CHECKOUTS).join(', ')}`);
  }
  const { config, log } = bootstrap();
  const backend = await startBackend({ config, log, seed: false, standIns: checkout ? { checkout } : {} });
  console.log(`GraphQL and GraphiQL: ${backend.url} (checkout: ${backend.services.checkout.steps.name})`);
  onShutdown(log, () => backend.stop());
});
