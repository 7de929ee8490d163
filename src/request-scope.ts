import { AsyncLocalStorage } from 'node:async_hooks';

/** What every log line and error of one HTTP request carries, without threading it through calls. */
export interface RequestScope {
  requestId: string;
  /** The client's address: the socket's peer, or the forwarded address when TRUST_PROXY believes the peer. */
  clientAddress?: string;
  operation?: string;
  /** Transaction attempts the request made (retries included). */
  attempts?: number;
  /** The answer was a stored Idempotency-Key response. */
  replayed?: boolean;
  /** A business status (ISSUED, MONTHLY_CAP, …) or the first error code. */
  outcome?: string;
  /** SQLSTATE of the database error behind a failure. */
  sqlState?: string;
  /** Epoch ms after which the request gives up: every database call it makes is limited by it. */
  deadline?: number;
}

const scope = new AsyncLocalStorage<RequestScope>();

export function runInRequestScope<T>(value: RequestScope, fn: () => T): T {
  return scope.run(value, fn);
}

export function currentRequestScope(): RequestScope | undefined {
  return scope.getStore();
}

/** Runs `fn` outside any request: work a request only set off (a health check) must not inherit its deadline. */
export function outsideRequestScope<T>(fn: () => T): T {
  return scope.exit(fn);
}
