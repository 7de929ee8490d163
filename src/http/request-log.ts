import { randomUUID } from 'node:crypto';
import type { RequestReport } from '../graphql/context.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../services/metrics/metrics.js';
import { runInRequestScope, type RequestScope } from '../core/request-scope.js';
import {
  contextFrom,
  isTracedPath,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceContext,
  traceparentOf,
  tracing,
  untraced,
} from '../core/tracing.js';
import type { Span } from '@opentelemetry/api';
import { INVALID_OPERATION } from './operation.js';

/** The server span's end: the status, and what the request came to (its operation and outcome). */
function endServerSpan(span: Span, status: number, scope: RequestScope, report: RequestReport): void {
  span.setAttribute('http.response.status_code', status);
  if (scope.operation) span.setAttribute('app.operation', scope.operation);
  if (report.outcome) span.setAttribute('app.outcome', report.outcome);
  if (report.replayed) span.setAttribute('app.idempotency.replayed', true);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's x-request-id when it is 1 to 128 characters of [A-Za-z0-9._:-], else a new one. */
export function requestIdOf(presented: string | string[] | null | undefined): string {
  return typeof presented === 'string' && REQUEST_ID.test(presented) ? presented : randomUUID();
}

/** What the request log needs of a request, whichever path serves it. */
export interface RequestLine {
  method: string;
  path: string;
  requestId: string;
  /** The client's address (see RequestScope); in-process callers have none. */
  clientAddress?: string;
  header(name: string): string | undefined;
}

export interface RequestLog {
  /**
   * Runs one request in its request scope (its id on every log line) and, with tracing on, in its server
   * span (continuing the caller's `traceparent`). `serve` is handed what to call when the response
   * has gone out (one log line, one metric, the span's end), the `traceparent` to answer with, and
   * the request's report, to pass to Yoga with the server context: what the log line says the
   * request came to.
   */
  begin<T>(request: RequestLine, serve: (finish: (status: number) => void, traceparent: string | null, report: RequestReport) => T): T;
}

/** One line per request: what ran, how it ended, how long it took, how many attempts. No payloads. */
export function createRequestLog(log: Logger, metrics: Metrics): RequestLog {
  return {
    begin({ method, path, requestId, clientAddress, header }, serve) {
      const started = performance.now();
      const scope: RequestScope = clientAddress === undefined ? { requestId } : { requestId, clientAddress };
      const report: RequestReport = {};
      const traced = isTracedPath(path);
      // Tracing off costs nothing: not even the caller's traceparent is parsed.
      const server =
        !traced || !tracing.enabled
          ? null
          : startSpan(`${method} ${path}`, {
              kind: SpanKind.SERVER,
              parent: contextFrom({ traceparent: header('traceparent'), tracestate: header('tracestate') }),
              attributes: { 'http.request.method': method, 'url.path': path, 'http.route': path, 'url.scheme': 'http' },
            });
      const finish = (status: number) => {
        const { outcome, attempts, replayed, sqlState } = report;
        const seconds = (performance.now() - started) / 1000;
        const isGraphQL = path === '/graphql' || path === '/actions';
        // A GraphQL request that never reached execution (parse error, a limit, a refused body) is
        // counted as `invalid`: the label set stays the schema's root fields and a few fixed words.
        const operation = scope.operation ?? (isGraphQL && method !== 'GET' && method !== 'OPTIONS' ? INVALID_OPERATION : undefined);
        if (operation) metrics.requests.observe({ operation, outcome: outcome ?? 'OK' }, seconds);
        if (server) endServerSpan(server.span, status, scope, report);
        const level = isGraphQL ? 'info' : 'debug';
        // The line is built only when its level is logged (LOG_LEVEL=warn logs no request line).
        if (!log.isLevelEnabled(level)) return;
        const ids = server?.span.spanContext();
        log[level](
          {
            requestId,
            ...(ids ? { trace_id: ids.traceId, span_id: ids.spanId } : {}),
            operation,
            method,
            path,
            status,
            outcome,
            attempts,
            replayed,
            sqlState,
            durationMs: Math.round(seconds * 1000),
          },
          'request completed',
        );
      };
      const run = () => runInRequestScope(scope, () => serve(finish, server ? traceparentOf(server.context) : null, report));
      // A probe or a scrape makes no trace, and neither do its queries (/ready's select 1).
      if (server) return traceContext.with(server.context, run);
      return traced ? run() : untraced(run);
    },
  };
}
