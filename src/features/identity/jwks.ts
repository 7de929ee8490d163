/**
 * The keys behind JWT_SECRET's jwk_url. jose 5's createRemoteJWKSet keeps keys for a fixed time
 * whatever the provider says; this cache keeps them as long as the response's Cache-Control
 * max-age (or Expires) allows, and hands jose a local key set over them.
 */
import { createLocalJWKSet, errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import type { Logger } from '../../core/logger.js';

export interface RemoteKeySetOptions {
  /** Milliseconds since the epoch; tests move it by hand. */
  now?: () => number;
  /**
   * Least time between two fetches, successful or not: a flood of tokens naming unknown kids, keys
   * sent with no-store, or a provider that is down cost the provider one request per cooldown.
   */
  cooldownMs?: number;
  /** One fetch's time limit, body included. */
  timeoutMs?: number;
  /** How long keys are kept when the response sends neither Cache-Control max-age nor Expires. */
  defaultMaxAgeMs?: number;
}

const JWKS_DEFAULTS = { cooldownMs: 10_000, timeoutMs: 5_000, defaultMaxAgeMs: 600_000 } as const;

/**
 * The keys could not be fetched: the token is not proven bad, so the caller should try again.
 *
 * @example throw new KeysUnavailableError(30_000)
 */
export class KeysUnavailableError extends Error {
  constructor(readonly retryAfterMs: number) {
    super('The JWT signing keys could not be fetched');
    this.name = 'KeysUnavailableError';
  }
}

type LocalKeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * A JWKS fetched from its URL and kept, fetched again on an unknown key id at most once a cooldown.
 *
 * @example const getKey = new RemoteKeySet('https://auth.example/.well-known/jwks.json').resolver(log)
 */
export class RemoteKeySet {
  private readonly now: () => number;
  private readonly cooldownMs: number;
  private readonly timeoutMs: number;
  private readonly defaultMaxAgeMs: number;
  private keys: LocalKeySet | null = null;
  private freshUntil = 0;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private lastAttemptFailed = false;
  private inFlight: Promise<void> | null = null;

  constructor(
    readonly url: string,
    options: RemoteKeySetOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.cooldownMs = options.cooldownMs ?? JWKS_DEFAULTS.cooldownMs;
    this.timeoutMs = options.timeoutMs ?? JWKS_DEFAULTS.timeoutMs;
    this.defaultMaxAgeMs = options.defaultMaxAgeMs ?? JWKS_DEFAULTS.defaultMaxAgeMs;
  }

  /** jose's key lookup for one verification; `log` hears of a failed fetch. */
  resolver(log?: Logger): JWTVerifyGetKey {
    return async (header, token) => {
      const keys = await this.current(log);
      try {
        return await keys(header, token);
      } catch (error) {
        if (!(error instanceof joseErrors.JWKSNoMatchingKey)) throw error;
        return (await this.afterUnknownKey(log))(header, token);
      }
    };
  }

  /** Fresh keys; stale ones when the provider cannot be reached (better than refusing everyone). */
  private async current(log?: Logger): Promise<LocalKeySet> {
    if (this.keys !== null && this.now() < this.freshUntil) return this.keys;
    await this.refreshUnlessCooling(log);
    if (this.keys === null) throw this.unavailable();
    return this.keys;
  }

  /** A token names a kid we do not hold: the provider may have rotated its keys since we asked. */
  private async afterUnknownKey(log?: Logger): Promise<LocalKeySet> {
    await this.refreshUnlessCooling(log);
    // The provider could not be asked: the kid may be real, so the token is not proven bad.
    if (this.lastAttemptFailed || this.keys === null) throw this.unavailable();
    // Keys just fetched, or fetched within the cooldown: a kid still unknown is refused by jose.
    return this.keys;
  }

  private async refreshUnlessCooling(log?: Logger): Promise<void> {
    if (this.inFlight === null && this.now() - this.lastAttemptAt < this.cooldownMs) return;
    // Concurrent requests share one fetch.
    this.inFlight ??= this.fetchKeys(log).finally(() => {
      this.inFlight = null;
    });
    await this.inFlight;
  }

  private async fetchKeys(log?: Logger): Promise<void> {
    this.lastAttemptAt = this.now();
    try {
      const response = await fetch(this.url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(this.timeoutMs) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      // createLocalJWKSet refuses a body that is not a key set.
      this.keys = createLocalJWKSet(await response.json());
      this.freshUntil = this.now() + this.lifetimeOf(response.headers);
      this.lastAttemptFailed = false;
    } catch (error) {
      this.lastAttemptFailed = true;
      log?.warn({ err: error, jwkUrl: this.url, keptStaleKeys: this.keys !== null }, 'JWT signing keys could not be fetched');
    }
  }

  /**
   * How long a response's keys stay fresh: max-age, else Expires, else the default. no-store and
   * no-cache still cost the provider at most one request per cooldown: stale keys serve meanwhile.
   */
  private lifetimeOf(headers: Headers): number {
    const cacheControl = headers.get('cache-control') ?? '';
    const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl);
    const expires = headers.get('expires');
    if (/(?:^|,)\s*(?:no-store|no-cache)\b/i.test(cacheControl)) return 0;
    if (maxAge !== null) return Number(maxAge[1]) * 1000;
    if (expires !== null) return expiresInMs(expires, headers.get('date') ?? undefined, this.now());
    return this.defaultMaxAgeMs;
  }

  private unavailable(): KeysUnavailableError {
    return new KeysUnavailableError(Math.max(1_000, this.lastAttemptAt + this.cooldownMs - this.now()));
  }
}

/** Expires counts from the response's own Date when it sends one, so clock skew between hosts does not matter. */
function expiresInMs(expires: string, date: string | undefined, now: number): number {
  const at = Date.parse(expires);
  const origin = date === undefined ? Number.NaN : Date.parse(date);
  // An Expires that does not parse means "already expired" (RFC 9111 §5.3).
  if (Number.isNaN(at)) return 0;
  return at - (Number.isNaN(origin) ? now : origin);
}
