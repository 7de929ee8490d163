import type { AppConfig } from '../../core/config.js';
import { graphiqlOptions } from '../graphiql.js';
import { createGraphiQLPage, wantsGraphiQLPage } from '../graphiql-page.js';
import type { Route } from './route.js';

/** What a browser asking for GraphiQL at /graphql reads when GraphiQL is off (production). */
function graphiqlOff(): Response {
  return new Response('GraphiQL is served in development only. GraphQL itself answers POST /graphql with a JSON body.\n', {
    status: 406,
    headers: { 'content-type': 'text/plain; charset=utf-8' },
  });
}

/**
 * GraphiQL: its page and files (in development), and a browser's visit to /graphql sent there, or
 * told that GraphiQL is off. Its code is served from this process, not from a CDN: it works
 * offline and behind firewalls.
 */
export function graphiqlRoutes(config: AppConfig): Route[] {
  const settings = graphiqlOptions(config);
  const page = settings ? createGraphiQLPage({ ...settings, endpoint: '/graphql' }) : null;
  const browserAtGraphQL: Route = {
    matches: (method, pathname, request) => pathname === '/graphql' && wantsGraphiQLPage(method, request.headers.get('accept')),
    serve: () => (page ? page.redirect() : graphiqlOff()),
  };
  if (!page) return [browserAtGraphQL];
  const files: Route = {
    matches: (method, pathname) => page.serves(pathname) && (method === 'GET' || method === 'HEAD'),
    serve: (request) => page.serve(request),
  };
  return [files, browserAtGraphQL];
}
