import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { ConfigError } from '../core/config/error.js';

/** The file read when ENV_FILE names none: `.env` in the current folder (npm runs scripts from the project's root). */
const DEFAULT_ENV_FILE = '.env';

/**
 * Reads a `.env` file into `env` before the configuration is read: every entry point calls it
 * (through `bootstrap`), so `npm start`, the worker and the tools see the same settings without
 * repeating them on each command. A variable already set in the environment wins, even empty: the
 * file holds a developer's defaults, the command line overrides them. ENV_FILE names another file
 * (ENV_FILE=/dev/null reads none); a named file that does not exist stops the process. Returns the
 * file read, or null when there was none.
 *
 * Node's own parser (`util.parseEnv`, the one behind `--env-file`): `NAME=value` lines, `#`
 * comments, quoted values over several lines, `export ` prefixes.
 */
export function loadEnvFile(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string | null {
  const named = env['ENV_FILE']?.trim() || null;
  const file = path.resolve(cwd, named ?? DEFAULT_ENV_FILE);
  if (!existsSync(file)) {
    if (named !== null) throw new ConfigError('ENV_FILE', `${file} does not exist`);
    return null;
  }
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError('ENV_FILE', `cannot read ${file}: ${(error as Error).message}`);
  }
  for (const [name, value] of Object.entries(parseEnv(content))) {
    if (env[name] === undefined && value !== undefined) env[name] = value;
  }
  return file;
}

/**
 * The value the env file `file` (as `loadEnvFile` returned it) gives `name`, or null: what another
 * command run from the same folder would read when its shell does not set `name` itself.
 */
export function envFileValue(file: string | null, name: string): string | null {
  if (file === null) return null;
  try {
    return parseEnv(readFileSync(file, 'utf8'))[name] ?? null;
  } catch {
    return null;
  }
}
