import { group, wholeNumber } from './kinds.js';

/** Stopping without a dropped request (docs/operations.md, "Deploys"). */
export const shutdownVariables = group('Stopping', {
  graceMs: wholeNumber({ name: 'SHUTDOWN_GRACE_MS', default: 5_000, min: 0, max: 600_000 }).describe(
    'after SIGTERM, `/ready` answers 503 while the server still accepts and answers for this long, so that a load balancer ' +
      'stops sending first ([deploys](#deploys-without-a-dropped-request))',
  ),
  drainTimeoutMs: wholeNumber({ name: 'HTTP_DRAIN_TIMEOUT_MS', default: 15_000, min: 0, max: 600_000 }).describe(
    'then, with the listener closed, how long requests in flight get to end by themselves (idle keep-alive connections are closed ' +
      'with the listener when the whole server stops); what is still open is closed (longer than `REQUEST_DEADLINE_MS`, so a request ' +
      'in flight always ends by itself)',
  ),
});
