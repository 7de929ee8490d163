import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bootstrap, onShutdown, run } from '../../src/process/bootstrap.js';
import { AppError, ErrorCode } from '../../src/core/errors.js';
import type { AccessContexts } from '../../src/graphql/guards.js';
import { databaseRunners } from '../../src/graphql/context.js';
import { createDatabaseQueue } from '../../src/graphql/read.js';
import { issueCouponForSession } from '../../src/graphql/types/coupons.js';
import { actionSecretMatches, sessionFromVariables } from '../../src/features/identity/session.js';
import { runInRequestScope } from '../../src/core/request-scope.js';
import { openDatabase } from '../../src/process/open-database.js';
import { buildServices } from '../../src/services/services.js';
import { UNGATED_TURN } from '../../src/services/operation-turn.js';
import { parse } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { schema } from '../../src/graphql/schema.js';

/** The x-hasura-* headers of a Node request (Node gives their names in lower case). */
function hasuraHeaders(req: IncomingMessage): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith('x-hasura-') && typeof value === 'string') variables[name] = value;
  }
  return variables;
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The unit of the bench's raw row (issueCouponForSession: the same runner, statements,
 * idempotency and audit code, the same pool) behind the least HTTP server that can carry it: the
 * yardstick for what the project's HTTP and GraphQL layers cost. It answers an issueCoupon sent as
 * the load generator sends it to /graphql (the session in x-hasura-* headers beside
 * x-action-secret, the campaign in `variables.input`) with the payload the document selects,
 * `/health` for the load generator's connections and `/metrics` for the retries. No routing,
 * GraphQL, admission, limits or request log: none of that is the unit.
 *
 * With BARE_EXECUTES=graphql it executes the request's document instead, compiled once by
 * graphql-jit against the project's schema, on the same context (the schema's field, its guard
 * and its payload, no Yoga or envelop): the yardstick for what GraphQL execution itself costs.
 */
run(async () => {
  const { config, log } = bootstrap();
  const opened = await openDatabase({ config, log, schema: 'require-current' }, 'bench-bare');
  const services = buildServices(config, opened.database, log);
  const runners = databaseRunners(services.pool, services.transactions);

  const executesGraphQL = process.env['BARE_EXECUTES'] === 'graphql';
  const compiledQueries = new Map<string, CompiledQuery>();
  const compiledQueryOf = (query: string): CompiledQuery => {
    let compiled = compiledQueries.get(query);
    if (compiled === undefined) {
      const made = compileQuery(schema, parse(query));
      if (!isCompiledQuery(made)) throw new Error(`graphql-jit could not compile the document: ${JSON.stringify(made.errors)}`);
      compiledQueries.set(query, (compiled = made));
    }
    return compiled;
  };
  async function issue(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const { query, variables } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      query: string;
      variables: { input: { campaignId: string } };
    };
    const secret = req.headers['x-action-secret'];
    if (typeof secret !== 'string' || !actionSecretMatches(secret, config)) {
      return answer(res, 401, { errors: [{ message: 'Invalid x-action-secret', extensions: { code: ErrorCode.unauthenticated } }] });
    }
    const session = sessionFromVariables(hasuraHeaders(req));
    if (session?.role !== 'user' || session.tenantId === null || session.userId === null) {
      return answer(res, 403, { errors: [{ message: 'issueCoupon is for members', extensions: { code: ErrorCode.forbidden } }] });
    }
    const requestId = crypto.randomUUID();
    const clientLeft = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) clientLeft.abort();
    });
    const ctx: AccessContexts['member'] = {
      services,
      database: runners,
      session: { role: 'user', tenantId: session.tenantId, userId: session.userId },
      requestId,
      deadline: Date.now() + config.requests.deadlineMs,
      turn: UNGATED_TURN,
      signal: clientLeft.signal,
      databaseQueue: createDatabaseQueue(),
      log,
      idempotencyKeyHeader: null,
      idempotency: null,
      report: {},
    };
    if (executesGraphQL) {
      const compiled = compiledQueryOf(query);
      return answer(res, 200, await runInRequestScope({ requestId }, async () => compiled.query(undefined, ctx, variables)));
    }
    try {
      const result = await runInRequestScope({ requestId }, () => issueCouponForSession(ctx, variables.input));
      answer(res, 200, { data: { issueCoupon: result } });
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      answer(res, 200, { errors: [{ message: error.message, extensions: { code: error.code } }] });
    }
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'POST') {
      issue(req, res).catch((error: unknown) => {
        log.error({ err: error }, 'bare server: the issue failed');
        answer(res, 500, { errors: [{ message: 'Internal server error', extensions: { code: ErrorCode.internal } }] });
      });
    } else if (req.url === '/metrics') {
      void services.metrics.scrape().then((text) => {
        res.writeHead(200, { 'content-type': services.metrics.registry.contentType });
        res.end(text);
      });
    } else {
      answer(res, 200, { status: 'ok' });
    }
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(config.server.port, '127.0.0.1', resolve));
  console.log(`bare node:http server: http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`);
  onShutdown(log, async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    await services.budgetLeases.stop();
    await opened.close();
  });
});
