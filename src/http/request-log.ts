import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import { runInRequestScope, type RequestScope } from '../request-scope.js';
import { INVALID_OPERATION } from './operation.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's x-request-id when it is 1 to 128 characters of [A-Za-z0-9._:-], else a new one. */
export function requestIdOf(presented: string | string[] | null | undefined): string {
  return typeof presented === 'string' && REQUEST_ID.test(presented) ? presented : randomUUID();
}

export interface RequestLog {
  /**
   * Runs one request in its scope (its id on every log line) and returns what `finish` must be
   * told when the response has gone out: one log line and one metric, whichever path served it.
   */
  begin<T>(method: string, path: string, requestId: string, serve: (finish: (status: number) => void) => T): T;
}

/** One line per request: what ran, how it ended, how long it took, how many attempts. No payloads. */
export function createRequestLog(log: Logger, metrics: Metrics): RequestLog {
  return {
    begin(method, path, requestId, serve) {
      const started = performance.now();
      const scope: RequestScope = { requestId };
      const finish = (status: number) => {
        const { outcome, attempts, replayed, sqlState } = scope;
        const seconds = (performance.now() - started) / 1000;
        const isGraphQL = path === '/graphql' || path === '/actions';
        // A GraphQL request that never reached execution (parse error, a limit, a refused body) is
        // counted as `invalid`: the label set stays the schema's root fields and a few fixed words.
        const operation = scope.operation ?? (isGraphQL && method !== 'GET' && method !== 'OPTIONS' ? INVALID_OPERATION : undefined);
        if (operation) metrics.requests.observe({ operation, outcome: outcome ?? 'OK' }, seconds);
        log[isGraphQL ? 'info' : 'debug'](
          { requestId, operation, method, path, status, outcome, attempts, replayed, sqlState, durationMs: Math.round(seconds * 1000) },
          'request completed',
        );
      };
      return runInRequestScope(scope, () => serve(finish));
    },
  };
}
