/** Every this many takes, the buckets that have refilled are forgotten. */
const SWEEP_EVERY = 1_024;

/**
 * Token buckets by key: each key may spend `burst` at once and gets `rate` tokens a second back.
 * A full bucket is the same as none, so buckets that refilled are dropped from time to time and
 * the map holds only keys that spent recently.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private takes = 0;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes `count` tokens of `key`'s bucket: 0 when they were there, else the wait (ms) until they will be, taking none. */
  take(key: string, wanted = 1): number {
    // More than a burst at once could never be had: a full bucket pays for it.
    const count = Math.min(wanted, this.burst);
    const now = this.now();
    if (++this.takes % SWEEP_EVERY === 0) this.sweep(now);
    const tokens = this.tokensOf(key, now);
    if (tokens < count) return Math.ceil(((count - tokens) * 1000) / this.rate);
    this.buckets.set(key, { tokens: tokens - count, at: now });
    return 0;
  }

  /**
   * Takes a token of `key`'s bucket even when it is empty, as long as it will have refilled within
   * `maxWaitMs`: `waitMs` is how long the caller must wait before spending it. Not reserved when
   * it would take longer; `waitMs` is then the wait for a token.
   */
  reserve(key: string, maxWaitMs: number): { reserved: boolean; waitMs: number } {
    const now = this.now();
    if (++this.takes % SWEEP_EVERY === 0) this.sweep(now);
    const tokens = this.tokensOf(key, now);
    const waitMs = tokens >= 1 ? 0 : Math.ceil(((1 - tokens) * 1000) / this.rate);
    if (waitMs > maxWaitMs) return { reserved: false, waitMs };
    this.buckets.set(key, { tokens: tokens - 1, at: now });
    return { reserved: true, waitMs };
  }

  private tokensOf(key: string, now: number): number {
    const bucket = this.buckets.get(key);
    return bucket === undefined ? this.burst : Math.min(this.burst, bucket.tokens + ((now - bucket.at) * this.rate) / 1000);
  }

  /** Keys now holding a bucket (full ones are dropped at the sweeps). */
  size(): number {
    return this.buckets.size;
  }

  private sweep(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) * this.rate) / 1000 >= this.burst) this.buckets.delete(key);
    }
  }
}
