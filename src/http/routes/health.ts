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
 * The longest /ready waits for the health watcher's first check. A backend listens only after its
 * first check (backend.ts), so this is for an app served some other way, such as the tests'
 * in-process one: a load balancer's check has a timeout of its own, and a check that waits on a
 * connection being opened could outlast it. Just under a second, so that a first check that opens
 * its connection in time on a busy machine still answers 200.
 */
const READY_FIRST_CHECK_WAIT_MS = 900;

/**
 * /ready: 200 while the database answered its last health check, 503 otherwise (a load
 * balancer's check); 503 as soon as the process begins to drain, so that traffic moves away
 * before the listener closes. It answers from what the server already knows, never with a query
 * of its own, so a flood of requests cannot make it fail and a dead path cannot make it hang.
 * The database counts as unavailable while this server's writes fail for want of resources (a
 * full disk), and as available while another application holds every connection slot but this
 * server's pool holds connections (db/health.ts, checkDatabase).
 */
export function readiness(inputs: ReadinessInputs): () => Promise<Response> {
  return async () => {
    if (inputs.drain.draining) return Response.json({ status: 'draining' }, { status: 503 });
    const database = await withinFirstCheckWait(inputs.database.current());
    if (database === null) return Response.json({ status: 'database not checked yet' }, { status: 503 });
    return database.available ? Response.json({ status: 'ready' }) : Response.json({ status: 'database unavailable' }, { status: 503 });
  };
}

async function withinFirstCheckWait<T>(answer: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), READY_FIRST_CHECK_WAIT_MS)));
  try {
    return await Promise.race([answer, waited]);
  } finally {
    clearTimeout(timer);
  }
}
