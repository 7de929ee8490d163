/**
 * The server process's own clock, as the issue once read it: the naive twin of the period's one
 * clock (src/features/coupons/period.ts), which the database keeps. A process whose clock runs
 * ahead issues before a campaign opens; one that lags issues after it ended.
 */

/** The process's clock moved by `skewMs` (BENCH_CLOCK_SKEW_MS for the bench server's naive-clock strategy). */
export const processClock =
  (skewMs = Number(process.env['BENCH_CLOCK_SKEW_MS'] ?? 0)) =>
  (): Date =>
    new Date(Date.now() + skewMs);

/** Building an Intl formatter costs far more than using one: keep one per time zone. */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit' });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/**
 * The last month computed per time zone, by the minute it was computed for. Every time zone in use
 * today is a whole number of minutes from UTC, so a month never changes within a minute; every
 * issue asks, and formatting costs more than the rest of its work in Node.
 */
const lastMonths = new Map<string, { minute: number; month: string }>();
const MINUTE_MS = 60_000;

/**
 * The business calendar month (`YYYY-MM`) of an instant in the given IANA time zone:
 * 2026-09-30T15:00:00Z is 2026-10 in Asia/Tokyo, as the process reckons it.
 */
export function businessMonth(instant: Date, timeZone: string): string {
  const minute = Math.floor(instant.getTime() / MINUTE_MS);
  const last = lastMonths.get(timeZone);
  if (last?.minute === minute) return last.month;
  const month = formatMonth(instant, timeZone);
  lastMonths.set(timeZone, { minute, month });
  return month;
}

function formatMonth(instant: Date, timeZone: string): string {
  const parts = formatterFor(timeZone).formatToParts(instant);
  const year = parts.find((p) => p.type === 'year')?.value;
  const month = parts.find((p) => p.type === 'month')?.value;
  if (!year || !month) throw new Error(`cannot format ${instant.toISOString()} in ${timeZone}`);
  return `${year}-${month}`;
}
