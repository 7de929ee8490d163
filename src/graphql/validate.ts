import { badInput } from '../core/errors.js';

/**
 * Input checks that run before any SQL, so a client reads which field is wrong. The database
 * repeats the important ones as CHECK constraints.
 */
/**
 * A text of 1 to `maxLength` characters once trimmed, counted in code points as PostgreSQL's
 * char_length counts them: an emoji is one character, not its two UTF-16 units.
 */
export function requireText(value: string, field: string, maxLength: number): string {
  const trimmed = value.trim();
  if (trimmed.length === 0) throw badInput(`${field} must not be empty`, field);
  // Each code point takes one or two UTF-16 units: only a string longer than the limit in units can be over it.
  if (trimmed.length > maxLength && codePoints(trimmed) > maxLength) {
    throw badInput(`${field} must be at most ${maxLength} characters`, field);
  }
  return trimmed;
}

function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

const IDENTIFIER = /^[A-Za-z0-9_-]{1,64}$/;

export function requireIdentifier(value: string, field: string): string {
  if (!IDENTIFIER.test(value)) {
    throw badInput(`${field} must be 1 to 64 letters, digits, "_" or "-"`, field);
  }
  return value;
}

/** Whole yen, positive, and small enough that sums stay exact in PostgreSQL integer columns. */
export function requireYen(value: number, field: string, max = 1_000_000_000): number {
  if (!Number.isInteger(value) || value <= 0) throw badInput(`${field} must be a positive whole number of yen`, field);
  if (value > max) throw badInput(`${field} must be at most ${max} yen`, field);
  return value;
}

/** A page size argument (`first`, `limit`): a whole number from 1 to `max`. */
export function requirePageSize(value: number, field: string, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) throw badInput(`${field} must be from 1 to ${max}`, field);
  return value;
}
