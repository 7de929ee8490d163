import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { staleObjectives } from '../../src/features/huddles/cleanup.js';
import { createLogger } from '../../src/core/logger.js';
import { openToolDatabase } from '../support/tool-database.js';
import { startScratchDatabase } from './target.js';

/**
 * What the index on huddle_participants.last_heartbeat_at (dropped so that heartbeats are HOT
 * updates) would save the stale-huddle cleanup: the query of each cleanup pass (staleObjectives)
 * over 1,000 to 50,000 active sessions of five members, one in a hundred with a stale member, with
 * and without the index; best of five.
 *
 *   npx tsx test/load/cleanup-bench.ts
 */

const STALE_AFTER_MS = 30_000;
const BATCH = 100;
const RUNS = 5;

const scratch = await startScratchDatabase();
const database = openToolDatabase(scratch.databaseUrl, 'cleanup-bench', { max: 2, log: createLogger('warn') });
const sql = new pg.Client({ connectionString: scratch.databaseUrl });
try {
  await migrate(database.db);
  await sql.connect();
  await sql.query("insert into tenants (id, name) values ('t', 't')");
  const bestOf = async () => {
    let best = Infinity;
    for (let run = 0; run < RUNS; run++) {
      const started = performance.now();
      await staleObjectives(database.db, null, STALE_AFTER_MS, BATCH);
      best = Math.min(best, performance.now() - started);
    }
    return best;
  };
  for (const sessions of [1_000, 10_000, 50_000]) {
    await sql.query('delete from huddle_participants; delete from huddle_sessions');
    await sql.query(`insert into huddle_sessions (tenant_id, objective_id) select 't', 'o' || g from generate_series(1, $1) g`, [sessions]);
    await sql.query(`insert into huddle_participants (tenant_id, session_id, member_id, last_heartbeat_at)
                     select s.tenant_id, s.id, 'm' || m, case when m = 1 and random() < 0.01 then now() - interval '1 hour' else now() end
                       from huddle_sessions s, generate_series(1, 5) m`);
    await sql.query('analyze huddle_sessions; analyze huddle_participants');
    const without = await bestOf();
    await sql.query('create index huddle_participants_present on huddle_participants (last_heartbeat_at) where left_at is null');
    await sql.query('analyze huddle_participants');
    const withIndex = await bestOf();
    await sql.query('drop index huddle_participants_present');
    console.log(
      `${sessions} active sessions of 5 members: a cleanup pass's query ${without.toFixed(1)} ms without the index, ${withIndex.toFixed(1)} ms with it`,
    );
  }
} finally {
  await sql.end().catch(() => undefined);
  await database.close();
  await scratch.stop();
}
