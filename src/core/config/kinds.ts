/**
 * The kinds of value a configuration variable holds (a whole number in a range, a duration, a flag,
 * a URL, one of a list…), each a zod schema from the variable's text to its value. A refusal is the
 * schema's first message. What the docs' table says of a variable rides in the schema's `.meta()`:
 * `title` its name, `shown` its default and `accepts` its kind and range (from the kind), and
 * `description` its sentence (the variable's `.describe(…)`), so that `npm run docs:config` prints
 * the table from the schemas that read the environment.
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { isHttpUrl } from '../http-url.js';
import { ConfigError } from './error.js';

export type Env = Record<string, string | undefined>;

/** One environment variable: its text, trimmed (undefined when unset or blank), to its value. */
type Variable<T = unknown> = z.ZodType<T, string | undefined>;

/** A group's variables by the field of the configuration they fill; a field may hold a sub-group. */
interface Fields {
  readonly [field: string]: Variable | Fields;
}

export type Values<F extends Fields> = {
  -readonly [K in keyof F]: F[K] extends Variable ? z.output<F[K]> : F[K] extends Fields ? Values<F[K]> : never;
};

/** A group of variables under one heading of the docs' table. */
interface Group<F extends Fields> {
  readonly title: string;
  readonly fields: F;
}

export function group<F extends Fields>(title: string, fields: F): Group<F> {
  return { title, fields };
}

/** What the docs' table says of a variable: its row. */
interface Words {
  name: string;
  shown: string;
  accepts: string;
  doc: string;
}

function wordsOf(variable: Variable): Words {
  const meta = variable.meta() as { title: string; description?: string; shown: string; accepts: string };
  if (meta.description === undefined) throw new Error(`${meta.title}: its sentence for the docs is missing (.describe(…))`);
  return { name: meta.title, shown: meta.shown, accepts: meta.accepts, doc: meta.description };
}

const nameOf = (variable: Variable) => (variable.meta() as { title: string }).title;

/** The group's variables, sub-groups' included, in reading order. */
export function variablesOf(fields: Fields): Words[] {
  return Object.values(fields).flatMap((entry) => (entry instanceof z.ZodType ? [wordsOf(entry)] : variablesOf(entry)));
}

/** A range that starts at the value of a variable read before, in the same group. */
interface Floor {
  variable: string;
  max: number;
}

/** Reads every variable of the group in its order; the first wrong value stops with its refusal. */
export function readGroup<F extends Fields>({ fields }: Group<F>, env: Env): Values<F> {
  return readFields(fields, env, new Map());
}

function readFields<F extends Fields>(fields: F, env: Env, read: Map<string, unknown>): Values<F> {
  const values: Record<string, unknown> = {};
  for (const [field, entry] of Object.entries(fields)) {
    if (!(entry instanceof z.ZodType)) {
      values[field] = readFields(entry, env, read);
      continue;
    }
    const value = readVariable(entry, env);
    const { floor } = entry.meta() as { floor?: Floor };
    if (floor) checked(nameOf(entry), from(read.get(floor.variable) as number, floor.max), value);
    read.set(nameOf(entry), value);
    values[field] = value;
  }
  return values as Values<F>;
}

export function readVariable<T>(variable: Variable<T>, env: Env): T {
  const name = nameOf(variable);
  return checked(name, variable, env[name]?.trim() || undefined);
}

function checked<T>(name: string, schema: z.ZodType<T>, input: unknown): T {
  const result = schema.safeParse(input);
  if (!result.success) throw new ConfigError(name, result.error.issues[0]!.message);
  return result.data;
}

/**
 * What every variable states: its name and its default, if any (its sentence is the schema's
 * `.describe(…)`); `shown` words the docs' default column where the value would not.
 */
interface Spec<D> {
  name: string;
  default?: D;
  shown?: string;
}

/**
 * A variable whose text `present` reads. Unset, it is its default, or null when it has none: no
 * value ("(none)" in the docs), or one that follows another variable (src/core/config.ts fills it).
 */
function variable<T, D extends T | null>(spec: Spec<D>, present: z.ZodType<T, string>, accepts: string, show: (value: T) => string) {
  const fallback = spec.default ?? null;
  const shown = spec.shown ?? (fallback === null ? '(none)' : show(fallback as T));
  const schema = present.optional().transform((value) => value ?? fallback);
  return schema.meta({ title: spec.name, shown, accepts }) as Variable<[D] extends [null] ? T | null : T>;
}

/** A refusal from inside a transform: the message the variable's ConfigError carries. */
export function refuse(ctx: z.RefinementCtx, message: string): never {
  ctx.addIssue({ code: 'custom', message });
  return z.NEVER;
}

const code = (text: string) => `\`${text}\``;

const digits = z
  .string()
  .regex(/^\d+$/, { error: (issue) => `expected a whole number, got "${String(issue.input)}"`, abort: true })
  .transform(Number);

function from(min: number, max: number) {
  const error = (issue: { input?: unknown }) => `expected a number from ${min} to ${max}, got ${String(issue.input)}`;
  return z.number().min(min, { error }).max(max, { error });
}

/** `min` may name a variable read before it in the same group (readGroup checks it): a maximum never below its base. */
export function wholeNumber<D extends number | null = null>(spec: Spec<D> & { min: number | string; max: number }) {
  if (typeof spec.min === 'string') {
    const schema = variable(spec, digits, `whole number, ${code(spec.min)} to ${spec.max}`, String);
    return schema.meta({ ...schema.meta(), floor: { variable: spec.min, max: spec.max } satisfies Floor });
  }
  const range = from(spec.min, spec.max);
  // The docs' range is the check's own.
  return variable(spec, digits.pipe(range), `whole number, ${range.minValue} to ${range.maxValue}`, String);
}

/** A port of one's own choosing from 1024 up, or 0: an unused one, chosen at each start. */
export function portOrAny(spec: Spec<number> & { default: number }) {
  const present = digits.pipe(
    z.number().refine((port) => port === 0 || (port >= 1024 && port <= 65_535), {
      error: (issue) => `expected 0 or a number from 1024 to 65535, got ${String(issue.input)}`,
    }),
  );
  return variable(spec, present, '0 (any unused port), or 1024 to 65535', String);
}

/** A flag; the docs show its default as `true` or `false`. */
export function flag<D extends boolean | null = null>(spec: Spec<D>) {
  const present = z.stringbool({
    truthy: ['true', '1', 'yes', 'on'],
    falsy: ['false', '0', 'no', 'off'],
    error: (issue) => `expected true or false, got "${String(issue.input)}"`,
  });
  return variable(spec, present, '`true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`)', (value) => code(String(value)));
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
export function duration(spec: Spec<number> & { default: number; min: number; max: number }) {
  const span = `${spec.min / 1000} s to ${spec.max / 3_600_000} h`;
  const present = z.string().transform((raw, ctx) => {
    const ms = parseDuration(raw);
    if (ms === null) return refuse(ctx, `expected a duration such as 72h, 30m or 90s, got "${raw}"`);
    return ms < spec.min || ms > spec.max ? refuse(ctx, `expected from ${span}, got ${raw}`) : ms;
  });
  const accepts = `duration with its unit (\`90s\`, \`30m\`, \`72h\`, \`3d\`), ${span}`;
  return variable(spec, present, accepts, (ms) => code(formatDuration(ms)));
}

const httpUrlText = z.string().refine(isHttpUrl, { error: (issue) => `expected an http:// or https:// URL, got "${String(issue.input)}"` });

/** An http:// or https:// URL; unset: null. */
export function httpUrl(spec: Spec<null>) {
  return variable(spec, httpUrlText, '`http://` or `https://` URL', String);
}

/** One of a list of words; `expected` words the refusal when "one of a, b, c" would not say enough. */
export function oneOf<const W extends readonly [string, ...string[]], D extends W[number] | null = null>(
  spec: Spec<D> & { words: W; expected?: string },
) {
  const expected = spec.expected ?? `one of ${spec.words.join(', ')}`;
  const present = z.enum(spec.words, { error: (issue) => `expected ${expected}, got "${String(issue.input)}"` });
  return variable(spec, present as z.ZodType<W[number], string>, spec.words.map(code).join(', '), code);
}

/** Text of a given form; `expected` says the form in the refusal ("expected <expected>, got …"). */
export function text<D extends string | null = null>(spec: Spec<D> & { pattern: RegExp; expected: string; accepts: string }) {
  const present = z.string().regex(spec.pattern, { error: (issue) => `expected ${spec.expected}, got "${String(issue.input)}"` });
  return variable(spec, present, spec.accepts, code);
}

/** A secret: long enough, and never echoed in a refusal. */
export function secret(spec: Spec<null> & { minLength: number }) {
  const present = z.string().min(spec.minLength, { error: `must be at least ${spec.minLength} characters` });
  return variable(spec, present, `at least ${spec.minLength} characters`, String);
}

/** An absolute path of a file that exists (its contents are checked where they are read). */
export function file(spec: Spec<null>) {
  const present = z.string().transform((raw, ctx) => {
    const resolved = path.resolve(raw);
    const found = statSync(resolved, { throwIfNoEntry: false });
    return found?.isFile() ? resolved : refuse(ctx, `${resolved} ${found ? 'is not a file' : 'does not exist'}`);
  });
  return variable(spec, present, 'path of an existing file', String);
}

/** An absolute folder path; a file in its place is a mistake worth naming before PostgreSQL trips on it. */
export function folder(spec: Spec<null>) {
  const present = z.string().transform((raw, ctx) => {
    const resolved = path.resolve(raw);
    const isFile = statSync(resolved, { throwIfNoEntry: false })?.isDirectory() === false;
    return isFile ? refuse(ctx, `${resolved} is a file; expected a folder (created when missing)`) : resolved;
  });
  return variable(spec, present, 'path of a folder (created when missing)', String);
}

/** A value of a form of its own, read by `schema` (it refuses with `refuse`); `accepts` words its form in the docs. */
export function custom<T, D extends T | null = null>(spec: Spec<D> & { accepts: string; schema: z.ZodType<T, string> }) {
  return variable(spec, spec.schema, spec.accepts, (value) => code(String(value)));
}
