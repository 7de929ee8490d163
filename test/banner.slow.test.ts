import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput, spawnScript, stopScript, type ScriptEnv } from './support/scripts.js';
import { waitFor } from './support/wait.js';

// Two `npm start`s of a server with its embedded PostgreSQL: a slow trial.

/** The banner `npm start` prints with these settings, the server stopped once it has. */
async function bannerOf(env: ScriptEnv): Promise<string> {
  const server = spawnScript('src/entry/main.ts', { PORT: '0', EMBEDDED_PG_PORT: '0', ...env });
  const output = captureOutput(server);
  try {
    await waitFor(() => output().includes('Background workers:') || server.exitCode !== null || undefined, 'the banner', 120_000);
    expect(server.exitCode, output()).toBeNull();
    return output();
  } finally {
    await stopScript(server);
  }
}

describe("npm start's banner", () => {
  let folder: string;
  beforeAll(async () => {
    folder = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-banner-'));
  });
  afterAll(() => rm(folder, { recursive: true, force: true }));

  it("names GraphiQL's address, and a data folder in db:url's command only when the .env file does not name it", async () => {
    const dataDir = path.join(folder, 'postgres');
    const envFile = path.join(folder, '.env');
    await writeFile(envFile, `EMBEDDED_PG_DATA_DIR=${dataDir}\n`);

    const fromTheFile = await bannerOf({ ENV_FILE: envFile });
    expect(fromTheFile).toMatch(
      /GraphQL and GraphiQL: http:\/\/localhost:\d+\/graphql {3}\(GraphiQL: http:\/\/localhost:\d+\/graphiql\)\n/,
    );
    // db:url reads the same file, so the command needs nothing before it.
    expect(fromTheFile).toMatch(/Database: +postgres:\/\/\S+ {3}\(npm run -s db:url prints it\)\n/);

    // Set in the shell only: db:url run from another shell would look in the default folder.
    const fromTheShell = await bannerOf({ EMBEDDED_PG_DATA_DIR: dataDir });
    expect(fromTheShell).toContain(`(EMBEDDED_PG_DATA_DIR=${dataDir} npm run -s db:url prints it)\n`);
  }, 300_000);
});
