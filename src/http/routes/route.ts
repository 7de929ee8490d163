/**
 * One path of the HTTP surface besides GraphQL: the methods it answers and how. The router
 * (src/http/router.ts) tries the routes in order; a request no route takes goes on to GraphQL
 * or a 404.
 */
export interface Route {
  /** Whether this route answers the request. */
  matches(method: string, pathname: string, request: Request): boolean;
  serve(request: Request): Response | Promise<Response>;
}

/** A route of one path answering GET. */
export function getRoute(path: string, serve: Route['serve']): Route {
  return { matches: (method, pathname) => pathname === path && method === 'GET', serve };
}
