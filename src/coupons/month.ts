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
 * The business calendar month (`YYYY-MM`) of an instant in the given IANA time zone:
 * 2026-09-30T15:00:00Z is 2026-10 in Asia/Tokyo. The month always comes from the server's clock,
 * never from the client.
 */
export function businessMonth(instant: Date, timeZone: string): string {
  const parts = formatterFor(timeZone).formatToParts(instant);
  const year = parts.find((p) => p.type === 'year')?.value;
  const month = parts.find((p) => p.type === 'month')?.value;
  if (!year || !month) throw new Error(`cannot format ${instant.toISOString()} in ${timeZone}`);
  return `${year}-${month}`;
}
