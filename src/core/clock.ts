/** The source of "now" for business rules (a coupon's month); tests inject a fixed one. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
