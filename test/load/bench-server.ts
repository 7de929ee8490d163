import { bootstrap, onShutdown, run } from '../../src/cli/bootstrap.js';
import { couponIssuer } from '../../src/coupons/service.js';
import { startBackend } from '../../src/server.js';
import { ISSUERS } from './strategies.js';

/** The server with the coupon strategy named by BENCH_STRATEGY: how the benchmark runs the peers. */
run(async () => {
  const name = process.env['BENCH_STRATEGY'] ?? 'conditional';
  const strategy = ISSUERS[name];
  if (!strategy) throw new Error(`BENCH_STRATEGY must be one of ${Object.keys(ISSUERS).join(', ')}`);
  couponIssuer.replaceWith(strategy);
  const { config, log } = bootstrap();
  const backend = await startBackend({ config, log });
  console.log(`GraphQL and GraphiQL: ${backend.url} (coupon strategy: ${strategy.name})`);
  onShutdown(log, () => backend.stop());
});
