import { bootstrap, onShutdown, run } from '../../src/cli/bootstrap.js';
import { budgetLeasing } from '../../src/coupons/leases.js';
import { couponIssuer } from '../../src/coupons/service.js';
import { startBackend } from '../../src/server.js';
import { STRATEGIES } from './strategies.js';

/** The server with the coupon strategy named by BENCH_STRATEGY: how the benchmark runs the peers. */
run(async () => {
  const name = process.env['BENCH_STRATEGY'] ?? 'conditional';
  const strategy = STRATEGIES[name];
  if (!strategy) throw new Error(`BENCH_STRATEGY must be one of ${Object.keys(STRATEGIES).join(', ')}`);
  couponIssuer.replaceWith(strategy.issuer);
  if (strategy.leasing) budgetLeasing.replaceWith(strategy.leasing);
  const { config, log } = bootstrap();
  const backend = await startBackend({ config, log });
  console.log(
    `GraphQL and GraphiQL: ${backend.url} (coupon strategy: ${strategy.issuer.name}${strategy.leasing ? `, leases: ${strategy.leasing.name}` : ''})`,
  );
  onShutdown(log, () => backend.stop());
});
