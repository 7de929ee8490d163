import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Everything that flows down with a piece of async work (the request scope, the database layer's
 * transaction mark and call limit) lives in one AsyncLocalStorage: Node calls every enabled
 * instance's hook on every promise and timer the process creates, so each further instance costs
 * each of them a property copy (Node 20 and 22; from Node 24 the stores ride one frame per async
 * context instead). Each value has an async slot of its own; setting one copies the others.
 */
const storage = new AsyncLocalStorage<readonly unknown[]>();

/** Async slots made so far: each takes the next index of the store's array (an array copies faster than an object with symbol keys). */
let slots = 0;

/** One value that flows down with async work, beside the others in the same store. */
export interface AsyncSlot<T> {
  /** The value the current async context was given, if any. */
  get(): T | undefined;
  /** Runs `fn` with this async slot set to `value` (undefined: without it), every other one as it is. */
  run<R>(value: T | undefined, fn: () => R): R;
}

export function asyncSlot<T>(): AsyncSlot<T> {
  const index = slots++;
  return {
    get: () => storage.getStore()?.[index] as T | undefined,
    run: (value, fn) => {
      const values = storage.getStore()?.slice() ?? [];
      values[index] = value;
      return storage.run(values, fn);
    },
  };
}
