import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DB } from '../../db/schema.js';
import { SqlState, sqlStateOf } from '../../db/sqlstate.js';

/**
 * A campaign's period read against time (docs/design.md §4, "Campaigns over time"). One clock
 * decides, the database's: `now()` inside the statement that issues, whichever server process sent
 * it, so a process whose clock runs ahead cannot issue before a campaign opens, nor one that lags
 * after it ends. The coupon's `issued_at` is that same instant, so no coupon has an issuedAt before
 * its campaign's startsAt or at or after its endsAt, and its month is that instant's month.
 */

/** The instant an issue's statement decides and stamps at: its now(), to the millisecond the API shows. */
export const ISSUE_TIME = sql<Date>`date_trunc('milliseconds', now())`;

/**
 * The business month (`YYYY-MM`) of `instant` in the IANA time zone `timeZone` (2026-09-30T15:00:00Z is 2026-10 in Asia/Tokyo).
 *
 * @example sql`select ${monthOf(sql`now()`, 'Asia/Tokyo')} as month`
 */
export const monthOf = (instant: RawBuilder<Date>, timeZone: unknown) =>
  sql<string>`to_char(${instant} at time zone ${timeZone}::text, 'YYYY-MM')`;

/**
 * `instant` as Date.prototype.toJSON writes it, so that a stored answer or an event reads as the first answer did.
 *
 * @example sql`jsonb_build_object('issuedAt', ${jsonTimeOf(sql`k.issued_at`)})`
 */
export const jsonTimeOf = (instant: RawBuilder<unknown>) =>
  sql<string>`to_char(${instant} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * What the campaign row `alias`'s period answers at `instant`: NOT_STARTED before its start, ENDED from its end on, else null.
 *
 * @example sql`select ${periodRefusal('c', ISSUE_TIME)} from campaigns c`
 */
export function periodRefusal(alias: string, instant: RawBuilder<Date>) {
  const c = sql.raw(alias);
  return sql<string | null>`case when ${instant} < ${c}.starts_at then 'NOT_STARTED' when ${instant} >= ${c}.ends_at then 'ENDED' end`;
}

/**
 * The business time zone names a zone Node knows but the database does not: start-up stops, naming the variable (exit 2).
 *
 * @example throw new UnknownTimeZoneError('Mars/Olympus')
 */
export class UnknownTimeZoneError extends Error {
  override name = 'UnknownTimeZoneError';
  readonly exitCode = 2;
}

/**
 * Months are reckoned by the database (monthOf), and its time zone data may be older or newer than
 * Node's, which checked BUSINESS_TIME_ZONE: a zone only Node knows would fail every issue, so it
 * fails start-up instead.
 *
 * @example await assertTimeZoneKnown(db, 'Asia/Tokyo');
 */
export async function assertTimeZoneKnown(db: Kysely<DB>, timeZone: string): Promise<void> {
  try {
    await sql`select ${monthOf(sql<Date>`now()`, timeZone)}`.execute(db);
  } catch (error) {
    // `at time zone` with a zone the database does not know.
    if (sqlStateOf(error) !== SqlState.invalidParameterValue) throw error;
    throw new UnknownTimeZoneError(
      `BUSINESS_TIME_ZONE: the database does not know the time zone "${timeZone}" (its time zone data differs from Node's): ` +
        'choose a zone both know, such as Asia/Tokyo',
    );
  }
}
