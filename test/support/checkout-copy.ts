import { execFile } from 'node:child_process';
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const PROJECT = new URL('../..', import.meta.url).pathname;

/**
 * The project as a fresh clone has it, in `destination`: the files git tracks or would track
 * (edits not yet committed included), never what .gitignore keeps out (a developer's `.env`,
 * `.data/`, `dist/`, test artifacts). A listed file that another test run removed meanwhile is no
 * part of the project. Installed packages as `npm ci` would leave them: hard links when on the
 * same disk, else copies.
 */
export async function copyCheckout(destination: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: PROJECT,
    maxBuffer: 64 * 1024 * 1024,
  });
  for (const file of stdout.split('\0').filter(Boolean)) {
    const target = path.join(destination, file);
    await mkdir(path.dirname(target), { recursive: true });
    await copyFile(path.join(PROJECT, file), target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }
  await run('cp', ['-al', path.join(PROJECT, 'node_modules'), path.join(destination, 'node_modules')]).catch(() =>
    run('cp', ['-a', path.join(PROJECT, 'node_modules'), path.join(destination, 'node_modules')]),
  );
}
