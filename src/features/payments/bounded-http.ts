import http from 'node:http';
import https from 'node:https';
import Stripe from 'stripe';

/**
 * The HTTP client the `stripe` package sends through (its `httpClient` option), bounded where the
 * package's own Node client is not:
 *
 * - in bytes: its client appends every chunk of an answer to one string with no limit, so an answer
 *   of 600 MB ended the process (`RangeError: Invalid string length`, thrown in a stream's 'data'
 *   handler) and again after every restart, when the reconciler asked again. Here an answer is read
 *   up to `maxBytes` and then the connection is closed and the call fails as an unreadable answer;
 * - in time: its `timeout` is an idle timer on the socket, which a provider sending one byte a
 *   second never trips, and a timer racing the call left the call (and its connection) running.
 *   Here the call, answer included, has `timeout` from its start; at that moment the request is
 *   destroyed, which closes its socket.
 *
 * The failures reach the package as it expects them (HttpClient.makeTimeoutError, and
 * HttpClient.makeResponseBodyError with `code` ANSWER_TOO_LARGE), so it reports a
 * StripeConnectionError as for any lost connection; stripe.ts tells them apart by that code.
 */

export const ANSWER_TOO_LARGE = 'ANSWER_TOO_LARGE';

/** Keep-alive connections, as the package's own client keeps them; a destroyed request takes its socket with it. */
const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

class BoundedResponse extends Stripe.HttpClientResponse {
  constructor(
    private readonly response: http.IncomingMessage,
    private readonly maxBytes: number,
    /** Rejects the body when the call's time runs out while it is read. */
    private readonly expired: Promise<never>,
  ) {
    super(response.statusCode ?? 0, response.headers as Record<string, string>);
  }

  override getRawResponse(): unknown {
    return this.response;
  }

  override toStream(): never {
    throw new Error('streaming answers are not used');
  }

  dispose(): void {
    this.response.destroy();
  }

  override toJSON(): Promise<unknown> {
    return Promise.race([this.readBody(), this.expired]).then((body) => this._parseResponseBody(body));
  }

  private readBody(): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const fail = (error: unknown) => reject(Stripe.HttpClient.makeResponseBodyError(error));
      this.response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= this.maxBytes) return void chunks.push(chunk);
        this.response.destroy();
        fail(Object.assign(new Error(`the answer is over ${this.maxBytes} bytes`), { code: ANSWER_TOO_LARGE }));
      });
      this.response.once('error', fail);
      this.response.once('close', () => {
        if (!this.response.complete) fail(new Error('the connection closed before the answer was complete'));
      });
      this.response.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  }
}

export class BoundedHttpClient extends Stripe.HttpClient {
  constructor(private readonly maxBytes: number) {
    super();
  }

  override getClientName(): string {
    return 'node-bounded';
  }

  override makeRequest(
    host: string,
    port: string,
    path: string,
    method: string,
    headers: Record<string, string | number | string[]>,
    requestData: string,
    protocol: string,
    timeout: number,
  ): Promise<Stripe.HttpClientResponse> {
    const secure = protocol !== 'http';
    const request = (secure ? https : http).request({
      host,
      port,
      path,
      method,
      headers: headers as http.OutgoingHttpHeaders,
      agent: secure ? agents.https : agents.http,
    });
    let rejectExpired!: (error: unknown) => void;
    const expired = new Promise<never>((_, reject) => (rejectExpired = reject));
    expired.catch(() => undefined);
    const timer = setTimeout(() => {
      const error = Stripe.HttpClient.makeTimeoutError();
      request.destroy(error);
      rejectExpired(Stripe.HttpClient.makeResponseBodyError(error));
    }, timeout);
    timer.unref();
    return new Promise((resolve, reject) => {
      request.once('response', (response) => {
        // The socket closes when the answer was read, or when the request is destroyed at the limit.
        response.once('close', () => clearTimeout(timer));
        resolve(new BoundedResponse(response, this.maxBytes, expired));
      });
      request.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      request.end(requestData);
    });
  }
}
