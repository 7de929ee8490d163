import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startBackend } from '../src/server.js';
import { LoadClient } from '../test/load/client.js';
import { headerSessions, referenceScenario, runCouponScenario, couponRequests, setupCouponScenario } from '../test/load/scenarios/coupons.js';
import { runInTransaction } from '../src/db/transaction.js';
import { issueCoupon } from '../src/coupons/service.js';
import pg from 'pg';

const log = createLogger('warn');
const config = loadConfig({ PORT: '4555', EMBEDDED_PG_PORT: '54555', EMBEDDED_PG_DATA_DIR: '/tmp/prof-pg/data', RUN_WORKERS: 'false', DB_POOL_MAX: process.env.POOL ?? '10' });
const backend = await startBackend({ config, log, ephemeral: process.env.EPH === '1' });
const sql = new pg.Pool({ connectionString: backend.embedded!.connectionString() });
const conc = Number(process.env.C ?? 32);
for (let round = 0; round < 2; round++) {
  const client = new LoadClient(backend.url, conc);
  await client.open();
  const r = await runCouponScenario({ client, sql, scenario: referenceScenario(`p${Date.now()}`), sessions: headerSessions(), concurrency: conc, seed: 1 });
  console.log('http', r.requestsPerSecond.toFixed(0), 'rps p99', r.latency.p99.toFixed(1), r.invariants.violations.length);
  client.close();
}
// direct
{
  const scenario = referenceScenario(`d${Date.now()}`);
  const client = new LoadClient(backend.url, 1);
  await setupCouponScenario(client, scenario, headerSessions());
  client.close();
  const reqs = couponRequests(scenario, 1);
  let i = 0;
  const t = performance.now();
  await Promise.all(Array.from({ length: conc }, async () => {
    while (i < reqs.length) {
      const r = reqs[i++]!;
      await runInTransaction(backend.database.db, backend.services.transactions, { deadline: Date.now() + 10000 }, (trx) =>
        issueCoupon(trx, { tenantId: scenario.tenantId, memberId: r.memberId, campaignId: r.campaignId, now: new Date(), timeZone: 'Asia/Tokyo' }));
    }
  }));
  console.log('direct', (reqs.length / (performance.now() - t) * 1000).toFixed(0), 'rps');
}
await sql.end();
await backend.stop();
