import { bootstrap, onShutdown, run } from '../../src/process/bootstrap.js';
import { startBackend } from '../../src/entry/backend.js';
import { STRATEGIES } from './strategies.js';

/** The server with the coupon strategy named by BENCH_STRATEGY: how the benchmark runs the peers. */
run(async () => {
  const name = process.env['BENCH_STRATEGY'] ?? 'conditional';
  const strategy = STRATEGIES[name];
  if (!strategy) throw new Error(`BENCH_STRATEGY must be one of ${Object.keys(STRATEGIES).join(', ')}`);
  const { config, log } = bootstrap();
  const standIns = {
    ...(strategy.issuer ? { couponIssuer: strategy.issuer } : {}),
    ...(strategy.leasing ? { budgetLeasing: strategy.leasing } : {}),
    ...(strategy.split ? { budgetSplit: strategy.split } : {}),
  };
  const backend = await startBackend({ config, log, standIns });
  console.log(
    `GraphQL and GraphiQL: ${backend.url} (coupon strategy: ${strategy.issuer?.name ?? 'conditional updates'}${strategy.leasing ? `, leases: ${strategy.leasing.name}` : ''}${strategy.split ? ', budget split by yen' : ''})`,
  );
  onShutdown(log, () => backend.stop());
});
