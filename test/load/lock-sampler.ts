import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/** Between two samples: short against a hold of a fraction of a millisecond times thousands of issues, light on the machine. */
const SAMPLE_EVERY_MS = 2;

/**
 * How long a tenant's budget rows (its campaigns' budget slots and leases) are held, measured in
 * PostgreSQL and nowhere else: pgrowlocks lists the rows an open transaction has locked, sampled
 * every few milliseconds on a connection of its own. The mean number of locked rows times the
 * run's duration is the total time rows were held; divided by the coupons issued it is the mean
 * hold per coupon (Little's law), whatever the design: one statement, a transaction, retries.
 */
export async function startLockSampler(databaseUrl: string, tenantId: string): Promise<{ stop(): Promise<number> }> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-lock-sampler' });
  client.on('error', () => {});
  await client.connect();
  await client.query('create extension if not exists pgrowlocks');
  // A schema from before budget leases (the bench's baseline) has no lease table.
  const existing: string[] = [];
  for (const table of ['campaign_budget_slots', 'campaign_budget_leases']) {
    if ((await client.query<{ t: string | null }>('select to_regclass($1)::text as t', [table])).rows[0]!.t !== null) existing.push(table);
  }
  const query = `select ${existing
    .map((table) => `(select count(*) from pgrowlocks('${table}') l join ${table} s on s.ctid = l.locked_row where s.tenant_id = $1)`)
    .join(' + ')} as locked`;
  let running = true;
  let lockedSum = 0;
  let samples = 0;
  const started = performance.now();
  const loop = (async () => {
    while (running) {
      lockedSum += Number((await client.query<{ locked: string }>(query, [tenantId])).rows[0]!.locked);
      samples++;
      await sleep(SAMPLE_EVERY_MS);
    }
  })();
  return {
    /** Row-seconds held while it ran. */
    async stop() {
      running = false;
      await loop;
      const seconds = (performance.now() - started) / 1000;
      await client.end();
      return samples ? (lockedSum / samples) * seconds : 0;
    },
  };
}
