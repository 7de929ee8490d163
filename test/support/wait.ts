import { setTimeout as sleep } from 'node:timers/promises';
import { TEST_APP, type TestBackend } from './harness.js';

/** Resolves with what `find` finds once it finds something (polled every 50 ms); throws after `ms`. */
export async function waitFor<T>(find: () => T | undefined | Promise<T | undefined>, what: string, ms = 10_000): Promise<T> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(50)) {
    const found = await find();
    if (found !== undefined) return found;
  }
  throw new Error(`no ${what} within ${ms} ms`);
}

/** Resolves once some session of the backend's pool, in its own database (files run side by side), waits for a lock. */
export function waitForLockWaiter(backend: TestBackend, ms = 10_000): Promise<true> {
  return waitFor(
    async () => {
      const waiting = await backend.sql.query(
        "select 1 from pg_stat_activity where application_name = $1 and datname = current_database() and wait_event_type = 'Lock'",
        [TEST_APP],
      );
      return waiting.rowCount ? true : undefined;
    },
    'session of the app waiting for a lock',
    ms,
  );
}
