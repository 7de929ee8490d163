import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chown, cp, lstat, mkdir, readFile, readlink, rename, rm, rmdir, stat, symlink } from 'node:fs/promises';
import path from 'node:path';

/**
 * PostgreSQL refuses to run as root, so as root the embedded server runs as the `postgres` user.
 * That user must be able to walk down to its binaries and its data folder, which a project
 * cloned under /root or into a `mktemp -d` folder does not allow. Then the binaries are copied
 * once per version, and the data folder is kept, in a shared folder that user can reach.
 */

export const SUPERUSER = 'postgres';
/** Where the copies live unless EMBEDDED_PG_SHARED_DIR says otherwise. */
export const DEFAULT_SHARED_DIR = '/var/lib/mutation-backend';

export interface RunAs {
  uid: number;
  gid: number;
}

/** As root: the postgres user (created when missing); otherwise null, and PostgreSQL runs as us. */
export function postgresUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const lookup = () => ({
    uid: Number(execFileSync('id', ['-u', SUPERUSER]).toString().trim()),
    gid: Number(execFileSync('id', ['-g', SUPERUSER]).toString().trim()),
  });
  try {
    return lookup();
  } catch {
    execFileSync('groupadd', ['--system', SUPERUSER]);
    execFileSync('useradd', ['--system', '--gid', SUPERUSER, '--no-create-home', SUPERUSER]);
    return lookup();
  }
}

/** The first folder on the way down to `dir` (itself included) that `user` may not enter, or null. */
async function firstBlockedFolder(dir: string, user: RunAs): Promise<string | null> {
  const ancestors: string[] = [];
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    ancestors.unshift(current);
    if (current === path.dirname(current)) break;
  }
  for (const folder of ancestors) {
    const info = await stat(folder);
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if ((info.mode & bit) === 0) return folder;
  }
  return null;
}

export interface Binaries {
  initdb: string;
  postgres: string;
}

/**
 * The binaries as `user` can run them: where they are, or a copy per version under `sharedDir`.
 * The copy is made beside its final place and renamed into it, so a second process that starts
 * at the same moment finds either nothing or the whole copy.
 */
async function reachableBinaries(
  binaries: Binaries,
  user: RunAs,
  sharedDir: string,
): Promise<{ binaries: Binaries; copiedTo: string | null }> {
  const installed = path.dirname(path.dirname(binaries.postgres)); // .../native: bin/, lib/, share/
  if ((await firstBlockedFolder(path.dirname(binaries.postgres), user)) === null) return { binaries, copiedTo: null };
  const { name, version } = JSON.parse(await readFile(path.join(installed, '..', 'package.json'), 'utf8')) as {
    name: string;
    version: string;
  };
  const copy = path.join(sharedDir, 'binaries', `${name.replace(/[^\w.-]+/g, '_')}-${version}`);
  const inCopy = (binary: string) => path.join(copy, path.relative(installed, binary));
  const copied: Binaries = { initdb: inCopy(binaries.initdb), postgres: inCopy(binaries.postgres) };
  if (await exists(copied.postgres)) return { binaries: copied, copiedTo: copy };
  await mkdir(path.dirname(copy), { recursive: true, mode: 0o755 });
  const partial = `${copy}.partial-${process.pid}`;
  await cp(installed, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  try {
    await rename(partial, copy);
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    if (!(await exists(copied.postgres))) throw error;
  }
  return { binaries: copied, copiedTo: copy };
}

/**
 * The data folder as `user` can reach it: `dataDir` itself, or a folder under `sharedDir` that
 * `dataDir` becomes a link to, so every tool that looks in `dataDir` finds the same cluster.
 */
async function reachableDataDir(dataDir: string, user: RunAs, sharedDir: string): Promise<string> {
  const found = await lstat(dataDir).catch(() => null);
  let target: string;
  if (found?.isSymbolicLink()) {
    target = path.resolve(path.dirname(dataDir), await readlink(dataDir));
  } else {
    if ((await firstBlockedFolder(path.dirname(dataDir), user)) === null) return dataDir;
    target = path.join(sharedDir, 'data', createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16));
    if (found?.isDirectory() && (await exists(path.join(dataDir, 'PG_VERSION')))) {
      throw new Error(
        `The embedded PostgreSQL data in ${dataDir} is out of reach of the "${SUPERUSER}" user. ` +
          'Move it to a folder that user can enter, or set EMBEDDED_PG_DATA_DIR to one.',
      );
    }
  }
  // The way down stays open to the postgres user; the folder itself is its own.
  await mkdir(path.dirname(target), { recursive: true, mode: 0o755 });
  await mkdir(target, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  await chown(target, user.uid, user.gid);
  if (!found?.isSymbolicLink()) {
    if (found?.isDirectory()) await rmdir(dataDir); // empty: the link takes its place
    await symlink(target, dataDir);
  }
  return target;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

export interface ReachablePlaces {
  binaries: Binaries;
  dataDir: string;
  /** One sentence for the log when something had to move, else null. */
  moved: string | null;
}

/** Binaries and data folder where `user` (the postgres user, as root) can reach them. */
export async function reachablePlaces(binaries: Binaries, dataDir: string, user: RunAs, sharedDir: string): Promise<ReachablePlaces> {
  await mkdir(sharedDir, { recursive: true, mode: 0o755 });
  const blockedShared = await firstBlockedFolder(sharedDir, user);
  if (blockedShared) {
    throw new Error(`The "${SUPERUSER}" user cannot enter ${blockedShared}: set EMBEDDED_PG_SHARED_DIR to a folder it can reach.`);
  }
  const blockedProject =
    (await firstBlockedFolder(path.dirname(binaries.postgres), user)) ?? (await firstBlockedFolder(path.dirname(dataDir), user));
  const reached = await reachableBinaries(binaries, user, sharedDir);
  const reachedData = await reachableDataDir(dataDir, user, sharedDir);
  const moves = [
    reached.copiedTo ? `binaries from ${reached.copiedTo}` : null,
    reachedData.startsWith(path.join(sharedDir, 'data')) ? `data in ${reachedData} (${dataDir} links there)` : null,
  ].filter((move) => move !== null);
  return {
    binaries: reached.binaries,
    dataDir: reachedData,
    moved: moves.length
      ? `PostgreSQL runs as the "${SUPERUSER}" user, which cannot enter ${blockedProject ?? 'the project'}: ${moves.join('; ')}`
      : null,
  };
}
