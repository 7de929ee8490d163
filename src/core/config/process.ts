import { flag, group, oneOf, text, wholeNumber } from './kinds.js';

/** pino's level names; anything else would reach pino as a raw exception. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** How this process runs: its environment, its log, what it runs besides HTTP. */
export const processVariables = group('The process', {
  nodeEnv: text({
    name: 'NODE_ENV',
    default: 'development',
    pattern: /^[A-Za-z0-9_.-]{1,64}$/,
    expected: 'a name such as production or development',
    accepts: 'a name (letters, digits, `_`, `.`, `-`)',
  }).describe(
    'anything but `development` or `test` (`production`, `staging`, …) refuses dev mode and the embedded database, and hides GraphiQL',
  ),
  // Its default follows NODE_ENV (src/core/config.ts).
  logLevel: oneOf({ name: 'LOG_LEVEL', words: LOG_LEVELS, shown: '`info` (`silent` with `NODE_ENV=test`)' }).describe(
    'the least severe level the log writes; `silent` writes nothing',
  ),
  runWorkers: flag({ name: 'RUN_WORKERS', default: true }).describe(
    'run the background loops (outbox relay, huddle cleanup, key expiry, budget lease expiry, retention, payment reconciler) ' +
      'inside the server; `npm run worker` runs them alone',
  ),
  webConcurrency: wholeNumber({ name: 'WEB_CONCURRENCY', default: 1, min: 1, max: 64 }).describe(
    'HTTP processes sharing the port (node:cluster)',
  ),
  httpHeartbeatTimeoutMs: wholeNumber({ name: 'HTTP_HEARTBEAT_TIMEOUT_MS', default: 15_000, min: 1_000, max: 600_000 }).describe(
    'with `WEB_CONCURRENCY` > 1, an HTTP process beats to the primary every fifth of this; one not heard from for this long ' +
      '(frozen: SIGSTOP, a paused machine, a loop that never yields) is killed with SIGKILL and replaced ([all cores](#all-cores-web_concurrency))',
  ),
});
