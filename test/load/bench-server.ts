import { bootstrap, onShutdown, run } from '../../src/cli/bootstrap.js';
import { startBackend } from '../../src/server.js';
import { ISSUERS } from './strategies.js';

/** The server with the coupon strategy named by BENCH_STRATEGY: how the benchmark runs the peers. */
run(async () => {
  const name = process.env['BENCH_STRATEGY'] ?? 'conditional';
  const couponIssuer = ISSUERS[name];
  if (!couponIssuer) throw new Error(`BENCH_STRATEGY must be one of ${Object.keys(ISSUERS).join(', ')}`);
  const { config, log } = bootstrap();
  const backend = await startBackend({ config, log, couponIssuer });
  console.log(`GraphQL and GraphiQL: ${backend.url} (coupon strategy: ${couponIssuer.name})`);
  onShutdown(log, () => backend.stop());
});
