import { group, text, wholeNumber } from './kinds.js';

/** The HTTP server: where it listens, and what one connection and one request may take. */
export const serverVariables = group('The HTTP server', {
  // Its default follows dev mode: ACTION_SECRET and JWT_SECRET (src/core/config.ts).
  host: text({
    name: 'HOST',
    shown: '`127.0.0.1` in dev mode, else `0.0.0.0`',
    pattern: /^[A-Za-z0-9.:-]{1,253}$/,
    expected: 'an address or host name to bind to',
    accepts: 'an IPv4 or IPv6 address or a host name',
  }).describe('the interface the HTTP server binds to'),
  port: wholeNumber({ name: 'PORT', default: 4000, min: 0, max: 65_535 }).describe('HTTP port'),
  maxBodyBytes: wholeNumber({ name: 'MAX_BODY_BYTES', default: 100_000, min: 1_000, max: 10_000_000 }).describe(
    'larger request bodies are refused with 413',
  ),
  requestTimeoutMs: wholeNumber({ name: 'HTTP_REQUEST_TIMEOUT_MS', default: 30_000, min: 1_000, max: 600_000 }).describe(
    'the whole request (headers and body) must arrive within this; slower sockets get 408',
  ),
  maxConnections: wholeNumber({ name: 'HTTP_MAX_CONNECTIONS', default: 10_000, min: 1, max: 1_000_000 }).describe(
    'open sockets; more are closed at once',
  ),
  keepAliveTimeoutMs: wholeNumber({ name: 'HTTP_KEEP_ALIVE_TIMEOUT_MS', default: 65_000, min: 1_000, max: 3_600_000 }).describe(
    'how long an idle keep-alive connection stays open (announced as `Keep-Alive: timeout=65`); keep it above the idle timeout ' +
      'of the proxy in front ([keep-alive](#keep-alive-and-proxies))',
  ),
});
