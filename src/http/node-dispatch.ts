import type { IncomingMessage, ServerResponse } from 'node:http';
import proxyaddr from 'proxy-addr';
import { ErrorCode } from '../core/errors.js';
import type { RequestReport } from '../graphql/context.js';
import type { Logger } from '../core/logger.js';
import { isGraphQLContentType } from './body.js';
import { wantsGraphiQLPage } from './graphiql-page.js';
import { clientLeftSignal, MAX_REQUEST_HEADERS, readDeclaredBody, requestUrlCheck, requestUrlOf, toFetchRequest } from './node-request.js';
import type { ActionsHandler } from './actions.js';
import { writeAnswer, writeFetchResponse, type Answer } from './answer.js';
import { CLIENT_CLOSED_REQUEST, internalError, refusalBody } from './refusals.js';
import { requestIdOf, type RequestLine, type RequestLog } from './request-log.js';
import type { ServeFetch } from './serve-fetch.js';
import { PLAIN_CONTEXT_PART, type GraphQLServer } from './yoga.js';
import { processRegularResult } from 'graphql-yoga';
import { plainParamsOf, type KnownDocumentPath } from './known-document-path.js';
import { markReplayed } from './plugins/request-outcome.js';

/**
 * A request on a Node socket, into Yoga. Public APIs only: Yoga's own Fetch classes
 * (`yoga.fetchAPI.Request`) to build the request, `yoga.handle({ request, ...serverContext }, PLAIN_CONTEXT_PART)` for
 * /graphql's whole pipeline (every plugin's hooks, Yoga's negotiation and result processing), and
 * the actions handler (`yoga.getResultForParams`, actions.ts) for /actions. The one decision made
 * here is which requests are read straight off the socket instead of through the Fetch path
 * (router.ts); what is served is the same either way (test/pipeline-hooks.isolated.test.ts).
 */

export interface NodeDispatchParts {
  yoga: GraphQLServer;
  serveFetch: ServeFetch;
  requestLog: RequestLog;
  log: Logger;
  maxBodyBytes: number;
  actions: ActionsHandler;
  /** TRUST_PROXY: the peers whose X-Forwarded-For is believed. */
  trustProxy: string[];
  knownDocuments: KnownDocumentPath;
}

/** Methods a Fetch Request cannot carry (the Fetch standard forbids them). */
const NOT_FETCH_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);

/**
 * The client's address: the socket's peer, or, when TRUST_PROXY believes the peer, the address
 * its X-Forwarded-For names (the nearest hop no trusted proxy vouches for).
 */
function clientAddresses(trustProxy: string[]): (req: IncomingMessage) => string {
  if (trustProxy.length === 0) return (req) => req.socket.remoteAddress ?? 'unknown';
  const trust = proxyaddr.compile(trustProxy);
  return (req) => proxyaddr(req, trust);
}

/** The first value of a Node request's header. */
const headerOf = (req: IncomingMessage) => (name: string) => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * A request on a Node socket: refused at once when Node cannot have read it whole or it cannot
 * be a Fetch request; GraphQL with a declared length on the hot path; everything else through
 * the Fetch path.
 */
export function createNodeDispatch(parts: NodeDispatchParts): (req: IncomingMessage, res: ServerResponse) => void {
  const dispatch = new NodeDispatch(parts);
  return (req, res) => dispatch.serve(req, res);
}

/** The parts a request on a Node socket is served with, and the per-server memory of Hosts and proxies. */
class NodeDispatch {
  private readonly clientAddressOf: (req: IncomingMessage) => string;
  private readonly requestUrlParses = requestUrlCheck();

  constructor(private readonly parts: NodeDispatchParts) {
    this.clientAddressOf = clientAddresses(parts.trustProxy);
  }

  serve(req: IncomingMessage, res: ServerResponse): void {
    const requestId = requestIdOf(req.headers['x-request-id']);
    const clientAddress = this.clientAddressOf(req);
    const path = (req.url ?? '/').split('?')[0]!;
    const method = req.method ?? 'GET';
    const line = { method, path, requestId, clientAddress, header: headerOf(req) };
    if (this.refusedUnread(req, res, line)) return;
    const { maxBodyBytes } = this.parts;
    const declaredLength = Number(req.headers['content-length'] ?? 'NaN');
    // The hot path: GraphQL with a declared, acceptable length (Node's parser holds the body to
    // it) is read straight off the socket and handed to Yoga as a request of its own Fetch
    // implementation with the body as text: no stream is piped and no size is checked a second
    // time. Everything else (a browser asking for GraphiQL, a body that is not JSON included)
    // takes the Fetch path, which buffers and limits bodies of unknown length.
    const pageRequest = wantsGraphiQLPage(method, req.headers.accept);
    const isJsonPost = method === 'POST' && declaredLength <= maxBodyBytes && isGraphQLContentType(req.headers['content-type'] ?? null);
    if (path === '/graphql' && !pageRequest && (method === 'GET' || isJsonPost)) {
      // Media types are case-insensitive; Yoga compares them as written.
      if (isJsonPost) req.headers['content-type'] = req.headers['content-type']!.toLowerCase();
      const readBody = isJsonPost ? () => readDeclaredBody(req) : () => Promise.resolve(null);
      return this.serveOnSocket(res, line, readBody, (body, report) => this.answerGraphQL(req, res, body, requestId, report));
    }
    // Hasura's action calls, the same way: nothing of them is piped through a web stream or
    // buffered a second time, and no Fetch request or response is built for them.
    if (path === '/actions' && isJsonPost) {
      return this.serveOnSocket(
        res,
        line,
        () => readDeclaredBody(req),
        (body, report) => this.writeAnswered(res, requestId, () => this.parts.actions(this.fetchRequestOf(req, res), report, body ?? '')),
      );
    }
    this.parts
      .serveFetch(toFetchRequest(req, res), path, requestId, clientAddress)
      .then((response) => writeFetchResponse(response, res))
      .catch(this.writeFailed(res));
  }

  /** Refuses, before anything reads it, a request Node cannot have read whole or that cannot be a Fetch request: whether it did. */
  private refusedUnread(req: IncomingMessage, res: ServerResponse, line: RequestLine): boolean {
    const { log } = this.parts;
    const { requestId, method } = line;
    // Node keeps the first MAX_REQUEST_HEADERS headers and drops the rest unseen: a session
    // header past the cut would be judged by its absence. Nothing of such a request is read.
    if (req.rawHeaders.length >= 2 * MAX_REQUEST_HEADERS) {
      log.debug({ requestId, headers: req.rawHeaders.length / 2 }, 'refused a request with too many headers');
      this.refuse(res, line, 431, `A request may carry fewer than ${MAX_REQUEST_HEADERS} headers`, { connection: 'close' });
      return true;
    }
    // A Host that is not an authority (x:99999, [::1, ex ample) or a target the URL parser
    // refuses is the client's mistake: 400, never a crash with a stack.
    if (!this.requestUrlParses(req)) {
      log.debug({ requestId }, 'refused a request whose Host or target is not a valid URL');
      this.refuse(res, line, 400, 'The Host header and the request target must form a valid URL', { connection: 'close' });
      return true;
    }
    if (!NOT_FETCH_METHODS.has(method)) return false;
    this.refuse(res, line, 405, `${method} is not served here`, { allow: 'GET, POST, OPTIONS' });
    return true;
  }

  /** Answers at once on the socket, before anything else reads the request. */
  private refuse(res: ServerResponse, line: RequestLine, status: number, message: string, headers: Record<string, string> = {}) {
    this.parts.requestLog.begin(line, (finish) => {
      res.writeHead(status, { ...headers, 'content-type': 'application/json', 'x-request-id': line.requestId });
      res.end(refusalBody(line.path, message, { code: ErrorCode.badUserInput, requestId: line.requestId }));
      finish(status);
    });
  }

  /** A request of Yoga's own Fetch implementation: Node's headers as they are (what its own Node adapter hands it), a signal for the client leaving. */
  private fetchRequestOf(req: IncomingMessage, res: ServerResponse, body: string | null = null) {
    return new this.parts.yoga.fetchAPI.Request(requestUrlOf(req), {
      method: req.method,
      headers: req.headers as Record<string, string>,
      body,
      signal: clientLeftSignal(res),
    });
  }

  /** An answer made in process, written in one go; a crash outside GraphQL is a 500 of its own. */
  private async writeAnswered(res: ServerResponse, requestId: string, answered: () => Promise<Answer>) {
    let answer: Answer;
    try {
      answer = await answered();
    } catch (error) {
      this.parts.log.error({ err: error }, 'request failed outside GraphQL');
      return writeFetchResponse(internalError(requestId), res);
    }
    writeAnswer(res, answer);
  }

  /**
   * GraphQL read off the socket, the response in one write: a plain POST of a known document by the
   * known-document path, everything else by Yoga's whole pipeline, each on a request of Yoga's own
   * Fetch implementation.
   */
  private async answerGraphQL(req: IncomingMessage, res: ServerResponse, body: string | null, requestId: string, report: RequestReport) {
    let response: Response;
    try {
      const request = this.fetchRequestOf(req, res, body);
      response =
        (await this.answerKnown(req, request, body, report)) ?? (await this.parts.yoga.handle({ request, report }, PLAIN_CONTEXT_PART));
    } catch (error) {
      this.parts.log.error({ err: error }, 'request failed outside GraphQL');
      response = internalError(requestId);
    }
    await writeFetchResponse(response, res);
  }

  /**
   * The known-document path's answer, processed as Yoga processes a result for `application/json`
   * (its public `processRegularResult`) with the replay mark its response hook sets; null when the
   * request is not for that path. Only a POST that asks for `application/json` alone and has no
   * Origin (CORS and the Vary on it are the pipeline's), with plain parameters.
   */
  private async answerKnown(req: IncomingMessage, request: Request, body: string | null, report: RequestReport): Promise<Response | null> {
    if (body === null || req.method !== 'POST' || req.headers.accept !== 'application/json' || req.headers.origin !== undefined)
      return null;
    const params = plainParamsOf(body);
    const result = params === null ? null : await this.parts.knownDocuments.answer(request, params, report);
    if (result === null) return null;
    const response = processRegularResult(result, this.parts.yoga.fetchAPI, 'application/json');
    markReplayed(response.headers, report);
    return response;
  }

  /**
   * Served on the socket, with its request log line, its id (and traceparent) on the response, and
   * its body (null: none) read straight off the socket. The line is written once the response has
   * gone out, or, when the client hung up first, once the work is done (CLIENT_CLOSED_REQUEST, with
   * what the work came to): a mutation whose client left still ran, and its line says how it ended.
   */
  private serveOnSocket(
    res: ServerResponse,
    line: RequestLine,
    readBody: () => Promise<string | null>,
    answer: (body: string | null, report: RequestReport) => Promise<void>,
  ) {
    this.parts.requestLog.begin(line, (finish, traceparent, report) => {
      res.setHeader('x-request-id', line.requestId);
      if (traceparent) res.setHeader('traceparent', traceparent);
      let logged = false;
      let worked = false;
      let closed = false;
      const once = (status: number) => {
        if (logged) return;
        logged = true;
        finish(status);
      };
      // Node emits 'close' after 'finish' when the response went out, and alone when the socket went first.
      res.once('finish', () => once(res.statusCode));
      res.once('close', () => {
        closed = true;
        if (worked) once(CLIENT_CLOSED_REQUEST);
      });
      readBody()
        .then(
          (body) => answer(body, report),
          () => undefined, // the client left before its body arrived: nobody to answer
        )
        .catch(this.writeFailed(res))
        .finally(() => {
          worked = true;
          if (closed) once(CLIENT_CLOSED_REQUEST);
        });
    });
  }

  private writeFailed(res: ServerResponse) {
    return (error: unknown) => {
      this.parts.log.error({ err: error }, 'could not write the response');
      res.destroy();
    };
  }
}
