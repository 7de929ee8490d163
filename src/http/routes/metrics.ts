import { bearerToken, secretMatches } from '../../features/identity/session.js';
import type { Metrics } from '../../services/metrics/metrics.js';

/** /metrics: Prometheus text for the whole server; METRICS_TOKEN, when set, guards it. */
export function metricsRoute(metrics: Metrics, token: string | null): (request: Request) => Promise<Response> {
  return async (request) => {
    if (token !== null && !secretMatches(bearerToken(request.headers.get('authorization')), token)) {
      return Response.json(
        { message: '/metrics needs Authorization: Bearer <METRICS_TOKEN>' },
        { status: 401, headers: { 'www-authenticate': 'Bearer' } },
      );
    }
    return new Response(await metrics.scrape(), { headers: { 'content-type': metrics.registry.contentType } });
  };
}
