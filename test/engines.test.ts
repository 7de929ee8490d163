import { readFile } from 'node:fs/promises';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const readJson = async (file: string) => JSON.parse(await readFile(new URL(`../${file}`, import.meta.url), 'utf8'));

/**
 * `npm install` warns (EBADENGINE) for every locked package whose `engines.node` the running Node
 * does not satisfy. The oldest Node the project promises must satisfy them all.
 */
describe('Node versions', () => {
  it('the oldest Node the project accepts is a Node 20 and satisfies every locked package (no EBADENGINE)', async () => {
    const project = (await readJson('package.json')) as { engines: { node: string } };
    const oldest = semver.minVersion(project.engines.node)!;
    expect(oldest.major).toBe(20);
    const lock = (await readJson('package-lock.json')) as { packages: Record<string, { version?: string; engines?: { node?: string } }> };
    const unsupported = Object.entries(lock.packages)
      .filter(([, entry]) => entry.engines?.node && !semver.satisfies(oldest, entry.engines.node, { includePrerelease: true }))
      .map(([location, entry]) => `${location}@${entry.version} wants node ${entry.engines!.node}`);
    expect(Object.keys(lock.packages).length).toBeGreaterThan(100);
    expect(unsupported, `packages that warn on Node ${oldest.version}`).toEqual([]);
  });
});
