import type { DatabaseHealth } from '../../db/health.js';

/** /health: the process answers. It says nothing about the process itself. */
export function health(): Response {
  return Response.json({ status: 'ok' });
}

/**
 * What /ready judges by. Today that is the database as the health watcher last found it; a
 * server that is draining would be one more input here (not ready, whatever the database says).
 */
export interface ReadinessInputs {
  database: Pick<DatabaseHealth, 'current'>;
}

/**
 * /ready: 200 while the database answered its last health check, 503 otherwise (a load
 * balancer's check). It answers from what the server already knows, never with a query of its
 * own, so a flood of requests cannot make it fail and a dead path cannot make it hang.
 */
export function readiness(inputs: ReadinessInputs): () => Promise<Response> {
  return async () => {
    const database = await inputs.database.current();
    return database.available ? Response.json({ status: 'ready' }) : Response.json({ status: 'database unavailable' }, { status: 503 });
  };
}
