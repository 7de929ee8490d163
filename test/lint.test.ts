import { execFile } from 'node:child_process';
import { appendFile, cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The import rules of `npm run lint` (.dependency-cruiser.cjs) fire: each is broken on purpose in a
 * copy of the tree, and the checker must name it, from the planted file to its target. The tree
 * itself passes, and docs/design.md §2 lists the rules in the words of the configuration.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONFIG = '.dependency-cruiser.cjs';
const DEPCRUISE = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

interface Rule {
  name: string;
  comment: string;
}
const rules = (createRequire(import.meta.url)(path.join(ROOT, CONFIG)) as { forbidden: Rule[] }).forbidden;

/** One import that breaks a rule: appended to `file` (a path of the copy), naming `specifier`. */
interface Plant {
  file: string;
  specifier: string;
  /** The module the checker resolves the import to, as it reports it. */
  resolved: string;
}

const PLANTS: Record<string, Plant[]> = {
  // A cycle needs two imports: each neutral module's import of the other is allowed by itself.
  'no-circular': [
    { file: 'src/clock.ts', specifier: './config-error.js', resolved: 'src/config-error.ts' },
    { file: 'src/config-error.ts', specifier: './clock.js', resolved: 'src/clock.ts' },
  ],
  'neutral-imports-nothing-above': [{ file: 'src/errors.ts', specifier: './db/sqlstate.js', resolved: 'src/db/sqlstate.ts' }],
  'db-below-features': [{ file: 'src/db/seed.ts', specifier: '../coupons/month.js', resolved: 'src/coupons/month.ts' }],
  'features-below-services': [{ file: 'src/tenants/service.ts', specifier: '../metrics/metrics.js', resolved: 'src/metrics/metrics.ts' }],
  'features-know-no-graphql': [{ file: 'src/audit/service.ts', specifier: 'graphql', resolved: 'node_modules/graphql/index.js' }],
  'services-below-graphql': [{ file: 'src/admission.ts', specifier: './graphql/errors.js', resolved: 'src/graphql/errors.ts' }],
  'graphql-below-http': [{ file: 'src/graphql/scalars.ts', specifier: '../http/body.js', resolved: 'src/http/body.ts' }],
  'http-below-entry-points': [
    { file: 'src/http/error-status.ts', specifier: '../process/env-file.js', resolved: 'src/process/env-file.ts' },
  ],
  'process-below-entry-points': [{ file: 'src/process/env-file.ts', specifier: '../cli/db-url.js', resolved: 'src/cli/db-url.ts' }],
  'dev-tooling-only-where-it-starts': [
    { file: 'src/db/pool.ts', specifier: '../dev/embedded-postgres.js', resolved: 'src/dev/embedded-postgres.ts' },
  ],
  'dev-imports-only-neutral': [{ file: 'src/dev/embedded-access.ts', specifier: '../db/sqlstate.js', resolved: 'src/db/sqlstate.ts' }],
  'client-stands-alone': [{ file: 'src/client/mutate.ts', specifier: '../errors.js', resolved: 'src/errors.ts' }],
  'src-never-imports-tests': [{ file: 'src/logger.ts', specifier: '../test/planted.js', resolved: 'test/planted.ts' }],
};

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Runs the checker as `npm run lint` does, in `cwd`; returns the violations it reports. */
async function cruise(cwd: string): Promise<Violation[]> {
  const args = [DEPCRUISE, 'src', '--config', CONFIG, '--output-type', 'json'];
  // It exits non-zero when it finds violations; the report is on stdout either way.
  const { stdout } = await promisify(execFile)(process.execPath, args, { cwd, maxBuffer: 64 * 1024 * 1024 }).catch(
    (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
  );
  return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

describe('the import rules', () => {
  let copy: string;
  let planted: Violation[];
  let clean: Violation[];

  beforeAll(async () => {
    copy = await mkdtemp(path.join(tmpdir(), 'lint-'));
    await cp(path.join(ROOT, 'src'), path.join(copy, 'src'), { recursive: true });
    for (const file of [CONFIG, 'tsconfig.json', 'package.json']) await cp(path.join(ROOT, file), path.join(copy, file));
    await symlink(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
    await mkdir(path.join(copy, 'test'));
    await writeFile(path.join(copy, 'test/planted.ts'), 'export const planted = true;\n');
    for (const plant of Object.values(PLANTS).flat()) {
      await appendFile(path.join(copy, plant.file), `\nimport '${plant.specifier}';\n`);
    }
    [planted, clean] = await Promise.all([cruise(copy), cruise(ROOT)]);
  }, 180_000);
  afterAll(() => rm(copy, { recursive: true, force: true }));

  it('pass on the tree as it is', () => {
    expect(clean).toEqual([]);
  });

  it('each have a planted violation here', () => {
    expect(Object.keys(PLANTS).sort()).toEqual(rules.map((rule) => rule.name).sort());
  });

  for (const [name, plants] of Object.entries(PLANTS)) {
    it(`${name} fires on its planted import`, () => {
      // The node_modules of the copy is a link: a package resolves to its real path. A cycle is reported once, from one of its imports.
      const fired = planted.filter(
        (v) =>
          v.rule.name === name &&
          plants.some((plant) => v.from === plant.file && (v.to === plant.resolved || v.to.endsWith(`/${plant.resolved}`))),
      );
      expect(fired).not.toEqual([]);
    });
  }

  it('stand in docs/design.md §2 in the words of the configuration', async () => {
    const design = await readFile(path.join(ROOT, 'docs/design.md'), 'utf8');
    const listed = /<!-- lint rules: start -->\n([\s\S]*?)<!-- lint rules: end -->/.exec(design)?.[1];
    expect(listed).toBeDefined();
    expect(listed!.trim().split('\n')).toEqual(rules.map((rule) => `- \`${rule.name}\`: ${rule.comment}`));
  });
});
