import { sql } from 'kysely';
import type { RootPool } from '../../db/database.js';

/** /health: the process answers. It says nothing about the process itself. */
export function health(): Response {
  return Response.json({ status: 'ok' });
}

const READY_TIMEOUT_MS = 1_000;

/** /ready: 200 while the database answers within a second, 503 otherwise (a load balancer's check). */
export function readiness(pool: RootPool): () => Promise<Response> {
  return async () => {
    try {
      await Promise.race([
        sql`select 1`.execute(pool),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS).unref()),
      ]);
      return Response.json({ status: 'ready' });
    } catch {
      return Response.json({ status: 'database unavailable' }, { status: 503 });
    }
  };
}
