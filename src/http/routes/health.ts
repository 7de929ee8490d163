import type { DatabaseHealth } from '../../db/health.js';
import type { DrainState } from '../node-server.js';

/** /health: the process answers. It says nothing about the process itself. */
export function health(): Response {
  return Response.json({ status: 'ok' });
}

/**
 * What /ready judges by: the database as the health watcher last found it, and whether this
 * server has begun to drain (then it is not ready, whatever the database says).
 */
export interface ReadinessInputs {
  database: Pick<DatabaseHealth, 'current'>;
  drain: Pick<DrainState, 'draining'>;
}

/**
 * /ready: 200 while the database answered its last health check, 503 otherwise (a load
 * balancer's check); 503 as soon as the process begins to drain, so that traffic moves away
 * before the listener closes. It answers from what the server already knows, never with a query
 * of its own, so a flood of requests cannot make it fail and a dead path cannot make it hang.
 */
export function readiness(inputs: ReadinessInputs): () => Promise<Response> {
  return async () => {
    if (inputs.drain.draining) return Response.json({ status: 'draining' }, { status: 503 });
    const database = await inputs.database.current();
    return database.available ? Response.json({ status: 'ready' }) : Response.json({ status: 'database unavailable' }, { status: 503 });
  };
}
