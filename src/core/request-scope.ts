import { asyncSlot } from './async-context.js';

/**
 * What every layer of one HTTP request needs on the way down, without threading it through calls:
 * its id and log fields, its deadline. Nothing flows back up through it: what a request came to
 * (attempts, a replay, its outcome) travels in return values and in the GraphQL context's report.
 */
export interface RequestScope {
  requestId: string;
  /** The client's address: the socket's peer, or the forwarded address when TRUST_PROXY believes the peer. */
  clientAddress?: string;
  /** The operation's label (set once it is known, before it executes): every log line names it. */
  operation?: string;
  /** Epoch ms after which the request gives up: every database call it makes is limited by it. */
  deadline?: number;
}

const scope = asyncSlot<RequestScope>();

export function runInRequestScope<T>(value: RequestScope, fn: () => T): T {
  return scope.run(value, fn);
}

export function currentRequestScope(): RequestScope | undefined {
  return scope.get();
}

/** Runs `fn` outside any request: work a request only set off (a health check) must not inherit its deadline. */
export function outsideRequestScope<T>(fn: () => T): T {
  return scope.run(undefined, fn);
}
