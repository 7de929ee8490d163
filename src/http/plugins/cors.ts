import type { CORSOptions } from 'graphql-yoga';

/** The response headers a browser page may read: ids to quote, the replay mark, when to retry. */
const EXPOSED_HEADERS = ['x-request-id', 'Idempotent-Replayed', 'Retry-After', 'traceparent'];

/**
 * CORS by allow-list (CORS_ORIGINS). A listed origin is answered with itself and credentials; an
 * unlisted one gets no Access-Control-Allow-Origin at all, so its pages cannot read a response.
 * '*' (the development default) allows any origin, without credentials.
 */
export function corsOptions(origins: readonly string[]): (request: Request) => CORSOptions {
  const anyOrigin = origins.includes('*');
  return (request) => {
    const origin = request.headers.get('origin');
    if (origin === null) return false;
    if (anyOrigin) return { origin: ['*'], credentials: false, exposedHeaders: EXPOSED_HEADERS };
    if (!origins.includes(origin)) return false;
    return { origin: [origin], credentials: true, exposedHeaders: EXPOSED_HEADERS };
  };
}

/** The CORS answer depends on the Origin header: caches must keep one answer per origin. */
export function varyOnOrigin(request: Request, response: Response): void {
  if (request.headers.get('origin') !== null && !/\borigin\b/i.test(response.headers.get('vary') ?? '')) {
    response.headers.append('vary', 'Origin');
  }
}
