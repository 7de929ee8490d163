import { AsyncLocalStorage } from 'node:async_hooks';

/** What every log line and error of one HTTP request carries, without threading it through calls. */
export interface RequestScope {
  requestId: string;
  operation?: string;
}

const scope = new AsyncLocalStorage<RequestScope>();

export function runInRequestScope<T>(value: RequestScope, fn: () => T): T {
  return scope.run(value, fn);
}

export function currentRequestScope(): RequestScope | undefined {
  return scope.getStore();
}
