import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envFileValue, loadEnvFile } from '../src/process/env-file.js';
import { ConfigError } from '../src/core/config.js';
import { runScript } from './support/scripts.js';

const ROOT = new URL('..', import.meta.url);
const FROM_FILE = 'postgres://from-the-file@db.example:5432/app';

describe('the .env file', () => {
  let folder: string;
  beforeAll(async () => {
    folder = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-env-'));
  });
  afterAll(() => rm(folder, { recursive: true, force: true }));

  it('sets what the environment leaves unset, and the environment wins, even with an empty value', async () => {
    await writeFile(
      path.join(folder, '.env'),
      `# a comment\nPORT=4122\nexport LOG_LEVEL=debug\nDATABASE_URL="${FROM_FILE}" # trailing comment\nACTION_SECRET=from-the-file-0123456789\n`,
    );
    const env: NodeJS.ProcessEnv = { PORT: '4999', ACTION_SECRET: '' };
    expect(loadEnvFile(env, folder)).toBe(path.join(folder, '.env'));
    expect(env).toEqual({ PORT: '4999', ACTION_SECRET: '', LOG_LEVEL: 'debug', DATABASE_URL: FROM_FILE });
  });

  it("tells what the file gives a variable, whatever the environment says: the banner leaves out of db:url's command what the file already names", async () => {
    const file = path.join(folder, 'banner.env');
    await writeFile(file, 'EMBEDDED_PG_DATA_DIR=.data/mine\n');
    expect(envFileValue(file, 'EMBEDDED_PG_DATA_DIR')).toBe('.data/mine');
    expect(envFileValue(file, 'PORT')).toBeNull();
    expect(envFileValue(null, 'EMBEDDED_PG_DATA_DIR')).toBeNull();
    expect(envFileValue(path.join(folder, 'gone.env'), 'EMBEDDED_PG_DATA_DIR')).toBeNull();
  });

  it('reads ENV_FILE instead when it names a file, none when it is /dev/null, and stops on a named file that is missing', async () => {
    await writeFile(path.join(folder, 'staging.env'), 'PORT=4222\n');
    const named: NodeJS.ProcessEnv = { ENV_FILE: 'staging.env' };
    loadEnvFile(named, folder);
    expect(named['PORT']).toBe('4222');
    const none: NodeJS.ProcessEnv = { ENV_FILE: '/dev/null' };
    loadEnvFile(none, folder);
    expect(none).toEqual({ ENV_FILE: '/dev/null' });
    expect(loadEnvFile({}, os.tmpdir())).toBeNull();
    expect(() => loadEnvFile({ ENV_FILE: 'missing.env' }, folder)).toThrow(ConfigError);
    expect(() => loadEnvFile({ ENV_FILE: 'missing.env' }, folder)).toThrow(/^ENV_FILE: .*missing\.env does not exist/);
  });

  it('npm run db:url prints the DATABASE_URL of the .env in the current folder; one set in the environment wins', async () => {
    await writeFile(path.join(folder, '.env'), `DATABASE_URL=${FROM_FILE}\n`);
    const fromFile = await runScript('src/entry/cli/db-url.ts', { ENV_FILE: undefined, DATABASE_URL: undefined }, [], folder);
    expect({ code: fromFile.code, output: fromFile.output.trim() }).toEqual({ code: 0, output: FROM_FILE });
    const fromEnvironment = await runScript(
      'src/entry/cli/db-url.ts',
      { ENV_FILE: undefined, DATABASE_URL: 'postgres://env@db.example/app' },
      [],
      folder,
    );
    expect(fromEnvironment.output.trim()).toBe('postgres://env@db.example/app');
  });

  it('every entry point reads it before its configuration: a wrong value there stops each one, naming the variable', async () => {
    await writeFile(path.join(folder, 'wrong.env'), 'DB_POOL_MAX=lots\n');
    const entries: [string, string[]][] = [
      ['src/entry/main.ts', []],
      ['src/entry/worker/main.ts', []],
      ['src/entry/cli/reconcile.ts', []],
      ['src/entry/cli/adopt.ts', ['--tenant', 'shop']],
      ['src/entry/cli/db-url.ts', []],
      ['test/load/cli.ts', ['--scenario', 'documents']],
    ];
    const results = await Promise.all(
      entries.map(async ([script, args]) => {
        const { code, output } = await runScript(script, { ENV_FILE: path.join(folder, 'wrong.env'), DB_POOL_MAX: undefined }, args);
        return { script, code, named: output.includes('DB_POOL_MAX: expected a whole number') };
      }),
    );
    expect(results).toEqual(entries.map(([script]) => ({ script, code: 2, named: true })));
    // Six processes compiling TypeScript at once: a minute on a busy two-core machine, more under load.
  }, 300_000);

  it('is ignored by git, and .env.example names only documented variables', async () => {
    expect((await readFile(new URL('.gitignore', ROOT), 'utf8')).split('\n')).toContain('.env');
    const example = await readFile(new URL('.env.example', ROOT), 'utf8');
    const named = [...example.matchAll(/^#? ?([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]!);
    expect(named.length).toBeGreaterThan(4);
    const operations = await readFile(new URL('docs/operations.md', ROOT), 'utf8');
    expect(named.filter((name) => !operations.includes(`| \`${name}\``))).toEqual([]);
  });
});
