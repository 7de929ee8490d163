import { tryAgain } from '../../core/errors.js';

/**
 * The bound of checkouts waiting on the payment provider (PAYMENTS_MAX_WAITING). A checkout gives
 * its admission turn back while the provider answers, so MAX_IN_FLIGHT no longer bounds it: this
 * does. A place is taken before transaction 1 and kept until the answer; a checkout that finds no
 * place is TRY_AGAIN before anything is written. Per process, like the admission's turns.
 */
export class PaymentWaitingRoom {
  private taken = 0;

  constructor(
    private readonly places: number,
    /** The Retry-After of a refusal: about one call's limit (PAYMENTS_TIMEOUT_MS), when places free up. */
    private readonly retryAfterMs: number,
  ) {}

  get waiting(): number {
    return this.taken;
  }

  /** A place, given back by the returned function (once, however often it is called); TRY_AGAIN when none is free. */
  enter(): () => void {
    if (this.taken >= this.places) {
      throw tryAgain('Too many checkouts are waiting on the payment provider; resend the request later', {
        reason: 'payments busy',
        retryAfterMs: this.retryAfterMs,
      });
    }
    this.taken++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.taken--;
    };
  }
}
