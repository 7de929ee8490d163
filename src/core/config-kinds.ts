/**
 * The kinds of value a configuration variable holds (a whole number in a range, a duration, a flag,
 * a URL, one of a list…) and how one group of variables is read. Each kind carries what the docs'
 * table says of it, so that the table in docs/operations.md is printed from the same entries that
 * read the environment (src/core/config-table.ts, scripts/config-doc.ts).
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from './config-error.js';
import { isHttpUrl } from './http-url.js';

export type Env = Record<string, string | undefined>;

/** The environments where dev mode and the embedded PostgreSQL may run (NODE_ENV unset is development). */
export const DEVELOPMENT_ENVIRONMENTS = ['development', 'test'];

/**
 * What a default or a range may depend on: the variables read before it (the table's order is the
 * reading order, so a variable only names ones above it; NODE_ENV is read first of all).
 */
export class Known {
  private readonly values = new Map<string, unknown>();

  remember(name: string, value: unknown): void {
    this.values.set(name, value);
  }

  private value(name: string): unknown {
    if (!this.values.has(name)) throw new Error(`${name} must come before the variables that depend on it in the configuration table`);
    return this.values.get(name);
  }

  number(name: string): number {
    return this.value(name) as number;
  }

  nodeEnv(): string {
    return this.value('NODE_ENV') as string;
  }

  /** NODE_ENV unset, `development` or `test`. */
  development(): boolean {
    return DEVELOPMENT_ENVIRONMENTS.includes(this.nodeEnv());
  }

  /** Neither ACTION_SECRET nor JWT_SECRET: the server trusts x-hasura-* headers as sent. */
  devMode(): boolean {
    return this.value('ACTION_SECRET') === null && this.value('JWT_SECRET') === null;
  }
}

/** One environment variable: how it is read, and what the docs' table says of it. */
export interface Variable<T> {
  readonly name: string;
  /** The docs' "default" column (markdown). */
  readonly shownDefault: string;
  /** The docs' "accepts" column (markdown): the kind of value and its range. */
  readonly accepts: string;
  /** The docs' "meaning" column (markdown). */
  readonly doc: string;
  read(env: Env, known: Known): T;
}

/** A group of the table: its variables by the field of the configuration they fill; a field may hold a sub-group. */
export interface Fields {
  readonly [field: string]: Variable<unknown> | Fields;
}

export type Values<F extends Fields> = {
  -readonly [K in keyof F]: F[K] extends Variable<infer T> ? T : F[K] extends Fields ? Values<F[K]> : never;
};

export interface Group<F extends Fields> {
  /** The docs' heading above the group's rows. */
  readonly title: string;
  readonly fields: F;
}

export function group<F extends Fields>(title: string, fields: F): Group<F> {
  return { title, fields };
}

function isVariable(entry: Variable<unknown> | Fields): entry is Variable<unknown> {
  return typeof entry['read'] === 'function';
}

/** Reads every variable of the group in its order; each value is remembered for the ones after it. */
export function readGroup<F extends Fields>(fields: F, env: Env, known: Known): Values<F> {
  const values: Record<string, unknown> = {};
  for (const [field, entry] of Object.entries(fields)) {
    if (!isVariable(entry)) {
      values[field] = readGroup(entry, env, known);
      continue;
    }
    const value = entry.read(env, known);
    known.remember(entry.name, value);
    values[field] = value;
  }
  return values as Values<F>;
}

/** The group's variables, sub-groups' included, in the table's order. */
export function variablesOf(fields: Fields): Variable<unknown>[] {
  return Object.values(fields).flatMap((entry) => (isVariable(entry) ? [entry] : variablesOf(entry)));
}

/** A variable's value as set, trimmed; unset or blank: null. */
export function readString(env: Env, name: string): string | null {
  const value = env[name];
  if (value === undefined || value.trim() === '') return null;
  return value.trim();
}

/** What every variable states: its name and its sentence in the docs; `shown` overrides the default column. */
interface Described {
  name: string;
  doc: string;
  shown?: string;
}

/** A value the default is when nothing else says: a constant, or one computed from what is known. */
type Default<T> = T | ((known: Known) => T);

function defaultOf<T>(fallback: Default<T>, known: Known): T {
  return typeof fallback === 'function' ? (fallback as (known: Known) => T)(known) : fallback;
}

function shownDefault<T>(spec: Described, fallback: Default<T>, show: (value: T) => string): string {
  if (spec.shown !== undefined) return spec.shown;
  if (typeof fallback === 'function') throw new Error(`${spec.name}: a computed default needs its "shown" text for the docs`);
  return show(fallback);
}

const code = (text: string) => `\`${text}\``;

export function parseWholeNumber(raw: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `expected a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `expected a number from ${min} to ${max}, got ${value}`);
  return value;
}

/** `min` as a name: the value of that variable, read before (a maximum never below its base). */
export function wholeNumber(spec: Described & { default: Default<number>; min: number | string; max: number }): Variable<number> {
  const minOf = (known: Known) => (typeof spec.min === 'string' ? known.number(spec.min) : spec.min);
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: shownDefault(spec, spec.default, String),
    accepts: `whole number, ${typeof spec.min === 'string' ? code(spec.min) : spec.min} to ${spec.max}`,
    read(env, known) {
      const raw = readString(env, spec.name);
      return raw === null ? defaultOf(spec.default, known) : parseWholeNumber(raw, spec.name, minOf(known), spec.max);
    },
  };
}

/** A port of one's own choosing from 1024 up, or 0: an unused one, chosen at each start. */
export function portOrAny(spec: Described & { default: number }): Variable<number> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: String(spec.default),
    accepts: '0 (any unused port), or 1024 to 65535',
    read(env) {
      const raw = readString(env, spec.name);
      if (raw === null) return spec.default;
      const port = parseWholeNumber(raw, spec.name, 0, 65_535);
      if (port > 0 && port < 1024) throw new ConfigError(spec.name, `expected 0 or a number from 1024 to 65535, got ${port}`);
      return port;
    },
  };
}

/** A whole number, or unset for "no limit". */
export function optionalWholeNumber(spec: Described & { min: number; max: number }): Variable<number | null> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown ?? '(none)',
    accepts: `whole number, ${spec.min} to ${spec.max}`,
    read(env) {
      const raw = readString(env, spec.name);
      return raw === null ? null : parseWholeNumber(raw, spec.name, spec.min, spec.max);
    },
  };
}

export function flag(spec: Described & { default: Default<boolean> }): Variable<boolean> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: shownDefault(spec, spec.default, (value) => code(String(value))),
    accepts: '`true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`)',
    read(env, known) {
      const raw = readString(env, spec.name);
      if (raw === null) return defaultOf(spec.default, known);
      if (/^(true|1|yes|on)$/i.test(raw)) return true;
      if (/^(false|0|no|off)$/i.test(raw)) return false;
      throw new ConfigError(spec.name, `expected true or false, got "${raw}"`);
    },
  };
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration with its unit (90s, 30m, 72h, 3d) in milliseconds; null when it is not one. */
export function parseDuration(raw: string): number | null {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw.trim());
  return match ? Number(match[1]) * DURATION_UNITS_MS[match[2]!]! : null;
}

/** A duration in the largest unit that divides it: what one would write in the variable. */
function formatDuration(ms: number): string {
  const [unit, size] = Object.entries(DURATION_UNITS_MS)
    .reverse()
    .find(([, unitMs]) => ms % unitMs === 0)!;
  return `${ms / size}${unit}`;
}

/** A duration with its unit: a bare number would leave the unit to guess. */
export function duration(spec: Described & { default: number; min: number; max: number }): Variable<number> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: shownDefault(spec, spec.default, (ms) => code(formatDuration(ms))),
    accepts: `duration with its unit (\`90s\`, \`30m\`, \`72h\`, \`3d\`), ${spec.min / 1000} s to ${spec.max / 3_600_000} h`,
    read(env) {
      const raw = readString(env, spec.name);
      if (raw === null) return spec.default;
      const ms = parseDuration(raw);
      if (ms === null) throw new ConfigError(spec.name, `expected a duration such as 72h, 30m or 90s, got "${raw}"`);
      if (ms < spec.min || ms > spec.max) {
        throw new ConfigError(spec.name, `expected from ${spec.min / 1000} s to ${spec.max / 3_600_000} h, got ${raw}`);
      }
      return ms;
    },
  };
}

export function parseHttpUrl(raw: string, name: string): string {
  if (isHttpUrl(raw)) return raw;
  throw new ConfigError(name, `expected an http:// or https:// URL, got "${raw}"`);
}

/** An http:// or https:// URL; unset: null. */
export function httpUrl(spec: Described): Variable<string | null> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown ?? '(none)',
    accepts: '`http://` or `https://` URL',
    read: (env) => {
      const raw = readString(env, spec.name);
      return raw === null ? null : parseHttpUrl(raw, spec.name);
    },
  };
}

/** One of a list of words; `expected` words the refusal when "one of a, b, c" would not say enough. */
export function oneOf<const W extends readonly string[]>(
  spec: Described & { words: W; default: Default<W[number]>; expected?: string },
): Variable<W[number]> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: shownDefault(spec, spec.default, code),
    accepts: spec.words.map(code).join(', '),
    read(env, known) {
      const raw = readString(env, spec.name) ?? defaultOf(spec.default, known);
      if (!spec.words.includes(raw)) {
        throw new ConfigError(spec.name, `expected ${spec.expected ?? `one of ${spec.words.join(', ')}`}, got "${raw}"`);
      }
      return raw;
    },
  };
}

/** Text of a given form; `expected` says the form in the refusal ("expected <expected>, got …"). */
export function text(spec: Described & { pattern: RegExp; default: Default<string>; expected: string; accepts: string }): Variable<string> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: shownDefault(spec, spec.default, code),
    accepts: spec.accepts,
    read(env, known) {
      const raw = readString(env, spec.name) ?? defaultOf(spec.default, known);
      if (!spec.pattern.test(raw)) throw new ConfigError(spec.name, `expected ${spec.expected}, got "${raw}"`);
      return raw;
    },
  };
}

/** A secret: long enough, and never echoed in a refusal. */
export function secret(spec: Described & { minLength: number }): Variable<string | null> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown ?? '(none)',
    accepts: `at least ${spec.minLength} characters`,
    read(env) {
      const raw = readString(env, spec.name);
      if (raw !== null && raw.length < spec.minLength) throw new ConfigError(spec.name, `must be at least ${spec.minLength} characters`);
      return raw;
    },
  };
}

/** An absolute path of a file that exists (its contents are checked where they are read). */
export function file(spec: Described): Variable<string | null> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown ?? '(none)',
    accepts: 'path of an existing file',
    read(env) {
      const raw = readString(env, spec.name);
      if (raw === null) return null;
      const resolved = path.resolve(raw);
      const found = statSync(resolved, { throwIfNoEntry: false });
      if (!found?.isFile()) throw new ConfigError(spec.name, `${resolved} ${found ? 'is not a file' : 'does not exist'}`);
      return resolved;
    },
  };
}

/** An absolute folder path; a file in its place is a mistake worth naming before PostgreSQL trips on it. */
export function folder(spec: Described): Variable<string | null> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown ?? '(none)',
    accepts: 'path of a folder (created when missing)',
    read(env) {
      const raw = readString(env, spec.name);
      if (raw === null) return null;
      const resolved = path.resolve(raw);
      if (statSync(resolved, { throwIfNoEntry: false })?.isDirectory() === false) {
        throw new ConfigError(spec.name, `${resolved} is a file; expected a folder (created when missing)`);
      }
      return resolved;
    },
  };
}

/** A value of a form of its own: `parse` gets the trimmed value (null when unset) and throws ConfigError. */
export function custom<T>(
  spec: Described & { shown: string; accepts: string; parse: (raw: string | null, known: Known, name: string) => T },
): Variable<T> {
  return {
    name: spec.name,
    doc: spec.doc,
    shownDefault: spec.shown,
    accepts: spec.accepts,
    read: (env, known) => spec.parse(readString(env, spec.name), known, spec.name),
  };
}
