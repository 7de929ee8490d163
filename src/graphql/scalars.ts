import { Kind } from 'graphql';
import { builder } from './builder.js';
import { badInput } from '../core/errors.js';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function parseUuid(value: unknown): string {
  if (typeof value !== 'string' || !UUID_PATTERN.test(value))
    throw badInput('Expected a UUID such as 3f2b9c7e-1d4a-4e8b-9f00-2a6c1b5d7e90');
  return value.toLowerCase();
}

builder.scalarType('UUID', {
  description: 'A UUID in its canonical 36-character form.',
  serialize: (value) => String(value),
  parseValue: parseUuid,
  parseLiteral: (ast) => parseUuid(ast.kind === Kind.STRING ? ast.value : null),
});

/** Instants PostgreSQL's timestamptz and a four-digit ISO year both hold (JavaScript's Date reaches year -271821). */
const EARLIEST_INSTANT = Date.parse('0001-01-01T00:00:00.000Z');
const LATEST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

function parseDateTime(value: unknown): Date {
  const date = typeof value === 'string' ? new Date(value) : null;
  if (date === null || Number.isNaN(date.getTime())) throw badInput('Expected an ISO-8601 date-time');
  if (date.getTime() < EARLIEST_INSTANT || date.getTime() > LATEST_INSTANT) throw badInput('Expected a date-time from year 1 to 9999');
  return date;
}

builder.scalarType('DateTime', {
  description: 'An instant as an ISO-8601 string in UTC, e.g. 2026-10-01T03:00:00.000Z.',
  // Accepts a stored ISO string as well as a Date, so a replayed response serializes the same.
  serialize: (value) => new Date(value).toISOString(),
  parseValue: parseDateTime,
  parseLiteral: (ast) => parseDateTime(ast.kind === Kind.STRING ? ast.value : null),
});
