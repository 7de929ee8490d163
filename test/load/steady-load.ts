import { LoadClient, type LoadClientOptions } from './client.js';
import { runLoad, type LoadResult } from './run.js';
import type { LoadScenario } from './scenario.js';
import { headerSessions } from './scenarios/coupons.js';

/** A steady load has no end of its own; this only bounds one that is never stopped. */
const UNTIL_STOPPED_SECONDS = 24 * 3_600;

export interface SteadyLoadOptions {
  /** The GraphQL endpoint. */
  url: string;
  scenario: LoadScenario;
  /** Requests per second. */
  rate: number;
  /** The most connections the load opens. */
  connections: number;
  client?: LoadClientOptions;
}

export interface SteadyLoad {
  /** Resolves once the scenario is set up and the first requests are under way (rejects when the set-up failed). */
  started: Promise<void>;
  /** Milliseconds on the load's own clock (its samples' sentMs and endMs). */
  now(): number;
  /** Sends nothing new from now on; what was sent is still answered. */
  stopSending(): void;
  /** Stops sending, waits for every answer, closes the connections, and gives the run. */
  stop(): Promise<LoadResult>;
}

/**
 * The scenario at `rate` requests per second on the open model (each request sent at its time,
 * whatever the server does, and never resent), until stopped: the traffic a deploy or a
 * migration must leave unharmed.
 */
export function startSteadyLoad(options: SteadyLoadOptions): SteadyLoad {
  const { scenario } = options;
  const client = new LoadClient(options.url, options.connections, options.client);
  let sending = true;
  let origin = 0;
  let markStarted!: () => void;
  const begun = new Promise<void>((resolve) => (markStarted = resolve));
  const done = runLoad({
    client,
    sessions: headerSessions(),
    scenario: { ...scenario, request: (index, c, s) => (sending ? scenario.request(index, c, s) : null) },
    concurrency: options.connections,
    rate: options.rate,
    amount: { durationSeconds: UNTIL_STOPPED_SECONDS },
    sql: null,
    onProgress: (_done, elapsedMs) => {
      if (origin === 0) origin = performance.now() - elapsedMs;
      markStarted();
    },
  });
  return {
    started: Promise.race([begun, done.then(() => undefined)]),
    now: () => performance.now() - origin,
    stopSending: () => {
      sending = false;
    },
    async stop() {
      sending = false;
      try {
        return await done;
      } finally {
        client.close();
      }
    },
  };
}
