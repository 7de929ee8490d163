import { sql } from 'kysely';
import type { RootPool } from '../../db/database.js';
import type { DrainState } from '../node-server.js';

/** /health: the process answers. It says nothing about the process itself. */
export function health(): Response {
  return Response.json({ status: 'ok' });
}

const READY_TIMEOUT_MS = 1_000;

/**
 * /ready: 200 while the database answers within a second, 503 otherwise (a load balancer's check);
 * 503 as soon as the process begins to drain, whatever the database says, so that traffic moves
 * away before the listener closes.
 */
export function readiness(pool: RootPool, drain: DrainState): () => Promise<Response> {
  return async () => {
    if (drain.draining) return Response.json({ status: 'draining' }, { status: 503 });
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
