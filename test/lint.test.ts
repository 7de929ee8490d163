import { execFile } from 'node:child_process';
import { appendFile, cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The import rules of `npm run lint` (.dependency-cruiser.cjs) fire: each is broken on purpose in a
 * copy of the tree, and the checker must name it, from the planted file to its target. The tree
 * itself passes, and docs/design.md §2 lists the rules in the words of the configuration and the
 * layers in their order, as the README's layout does.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONFIG = '.dependency-cruiser.cjs';
const DEPCRUISE = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

interface Rule {
  name: string;
  comment: string;
  from: { path?: string };
  to: { path?: string };
}
const rules = (createRequire(import.meta.url)(path.join(ROOT, CONFIG)) as { forbidden: Rule[] }).forbidden;
const rule = (name: string) => rules.find((candidate) => candidate.name === name)!;

/** The files package.json's scripts start: the entry points. */
const ENTRY_POINTS = [
  ...new Set(
    Object.values((createRequire(import.meta.url)(path.join(ROOT, 'package.json')) as { scripts: Record<string, string> }).scripts).flatMap(
      (script) => [...script.matchAll(/(?<=\s)src\/([\w/.-]+\.ts)\b/g)].map((match) => match[1]!),
    ),
  ),
].sort();

/** The layers' folders, bottom first: each layer rule names its own, and the last one's targets end with the top layer. */
const layerRules = rules.filter((candidate) => candidate.name.endsWith('-imports-nothing-above'));
const LAYER_FOLDERS = [
  ...layerRules.map((candidate) => candidate.name.replace(/-imports-nothing-above$/, '')),
  /^\^src\/\((?:.*\|)?([^|]+)\)\/$/.exec(layerRules.at(-1)!.to.path!)![1]!,
];

/** One import that breaks a rule: appended to `file` (a path of the copy), naming `specifier`. */
interface Plant {
  file: string;
  specifier: string;
  /** The module the checker resolves the import to, as it reports it. */
  resolved: string;
}

const PLANTS: Record<string, Plant[]> = {
  // A cycle needs two imports: each core module's import of the other is allowed by itself.
  'no-circular': [
    { file: 'src/core/clock.ts', specifier: './config/error.js', resolved: 'src/core/config/error.ts' },
    { file: 'src/core/config/error.ts', specifier: '../clock.js', resolved: 'src/core/clock.ts' },
  ],
  'core-imports-nothing-above': [{ file: 'src/core/errors.ts', specifier: '../db/sqlstate.js', resolved: 'src/db/sqlstate.ts' }],
  'db-imports-nothing-above': [
    { file: 'src/db/seed.ts', specifier: '../features/coupons/period.js', resolved: 'src/features/coupons/period.ts' },
  ],
  'features-imports-nothing-above': [
    {
      file: 'src/features/tenants/service.ts',
      specifier: '../../services/metrics/metrics.js',
      resolved: 'src/services/metrics/metrics.ts',
    },
  ],
  'services-imports-nothing-above': [
    { file: 'src/services/admission.ts', specifier: '../graphql/errors.js', resolved: 'src/graphql/errors.ts' },
  ],
  'graphql-imports-nothing-above': [{ file: 'src/graphql/scalars.ts', specifier: '../http/body.js', resolved: 'src/http/body.ts' }],
  'http-imports-nothing-above': [
    { file: 'src/http/error-status.ts', specifier: '../process/env-file.js', resolved: 'src/process/env-file.ts' },
  ],
  'process-imports-nothing-above': [
    { file: 'src/process/env-file.ts', specifier: '../entry/backend.js', resolved: 'src/entry/backend.ts' },
  ],
  // One plant per entry point: each is imported by a module of its own layer, which only this rule forbids.
  'entry-points-imported-by-none': ENTRY_POINTS.map((entry) => ({
    file: 'src/entry/backend.ts',
    specifier: `./${path.posix.relative('entry', entry).replace(/\.ts$/, '.js')}`,
    resolved: `src/${entry}`,
  })),
  'features-know-no-graphql': [{ file: 'src/features/audit/service.ts', specifier: 'graphql', resolved: 'node_modules/graphql/index.js' }],
  'dev-tooling-only-where-it-starts': [
    { file: 'src/db/pool.ts', specifier: '../dev/embedded-postgres.js', resolved: 'src/dev/embedded-postgres.ts' },
  ],
  'dev-imports-only-core': [{ file: 'src/dev/embedded-access.ts', specifier: '../db/sqlstate.js', resolved: 'src/db/sqlstate.ts' }],
  'client-stands-alone': [{ file: 'src/client/mutate.ts', specifier: '../core/errors.js', resolved: 'src/core/errors.ts' }],
  // A new file at the top of src/, outside every layer's folder.
  'no-module-outside-a-layer': [{ file: 'src/stray.ts', specifier: './core/clock.js', resolved: 'src/core/clock.ts' }],
  'src-never-imports-tests': [{ file: 'src/core/logger.ts', specifier: '../../test/planted.js', resolved: 'test/planted.ts' }],
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
      const firedOn = (plant: Plant) =>
        planted.some(
          (v) => v.rule.name === name && v.from === plant.file && (v.to === plant.resolved || v.to.endsWith(`/${plant.resolved}`)),
        );
      if (name === 'no-circular') expect(plants.some(firedOn)).toBe(true);
      else expect(plants.filter((plant) => !firedOn(plant))).toEqual([]);
    });
  }

  it('name every file a script of package.json starts as an entry point', () => {
    expect(ENTRY_POINTS.length).toBeGreaterThanOrEqual(6);
    const entryPoints = new RegExp(rule('entry-points-imported-by-none').to.path!);
    expect(ENTRY_POINTS.filter((entry) => !entryPoints.test(`src/${entry}`))).toEqual([]);
  });

  it("leave no folder or module of src/ outside a layer's folder, src/dev/ or src/client/", async () => {
    const entries = await readdir(path.join(ROOT, 'src'), { withFileTypes: true });
    expect(LAYER_FOLDERS).toEqual(['core', 'db', 'features', 'services', 'graphql', 'http', 'process', 'entry']);
    expect(entries.filter((entry) => !entry.isDirectory() || ![...LAYER_FOLDERS, 'dev', 'client'].includes(entry.name))).toEqual([]);
  });

  it('leave runMutation nothing to call back in a types file: what an audit row names is a function of the feature', async () => {
    const folder = path.join(ROOT, 'src/graphql/types');
    const closures = [];
    for (const file of await readdir(folder)) {
      const text = await readFile(path.join(folder, file), 'utf8');
      closures.push(
        ...[...text.matchAll(/^\s*(entities|auditTenant): *(?:async *)?(?:\(|\w+ *=>|function)/gm)].map((match) => `${file}: ${match[1]}`),
      );
    }
    expect(closures).toEqual([]);
  });

  it("stand in docs/design.md §2's table and the README's layout in their order, top first and bottom first", async () => {
    const design = await readFile(path.join(ROOT, 'docs/design.md'), 'utf8');
    const tableFolders = [...design.matchAll(/^\| [^|]+ \| `src\/([a-z]+)\/`/gm)].map((match) => match[1]);
    expect(tableFolders).toEqual([...[...LAYER_FOLDERS].reverse(), 'dev', 'client']);
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const layout = /## Layout\n\n```\n([\s\S]*?)```/.exec(readme)![1]!;
    const layoutFolders = [...layout.matchAll(/^src\/([a-z]+)\//gm)].map((match) => match[1]);
    expect([...new Set(layoutFolders)]).toEqual([...LAYER_FOLDERS, 'dev', 'client']);
  });

  it('stand in docs/design.md §2 in the words of the configuration', async () => {
    const design = await readFile(path.join(ROOT, 'docs/design.md'), 'utf8');
    const listed = /<!-- lint rules: start -->\n([\s\S]*?)<!-- lint rules: end -->/.exec(design)?.[1];
    expect(listed).toBeDefined();
    expect(listed!.trim().split('\n')).toEqual(rules.map((rule) => `- \`${rule.name}\`: ${rule.comment}`));
  });
});

const KNIP = path.join(ROOT, 'node_modules/knip/bin/knip.js');

/** Runs knip as `npm run lint` does, in `cwd`: its exit code and the exports it names unused, by file. */
async function unusedExports(cwd: string): Promise<{ code: number; unused: string[] }> {
  const args = [KNIP, '--reporter', 'json'];
  const run = await promisify(execFile)(process.execPath, args, { cwd, maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (error: { code?: number; stdout?: string }) => ({ code: error.code ?? -1, stdout: error.stdout ?? '' }),
  );
  const report = JSON.parse(run.stdout) as { issues: { file: string; exports: { name: string }[]; types: { name: string }[] }[] };
  const unused = report.issues.flatMap((issue) => [...issue.exports, ...issue.types].map((item) => `${issue.file}: ${item.name}`));
  return { code: run.code, unused };
}

// An export nothing imports is dead code, or a name that says a module is used where it is not:
// `npm run lint` fails on it (knip.json names the entry points; a test file's exports count too).
describe('unused exports', () => {
  let copy: string;

  beforeAll(async () => {
    copy = await mkdtemp(path.join(tmpdir(), 'knip-'));
    for (const folder of ['src', 'test', 'scripts']) await cp(path.join(ROOT, folder), path.join(copy, folder), { recursive: true });
    const rootFiles = (await readdir(ROOT)).filter(
      (file) => file.endsWith('.ts') || ['knip.json', 'tsconfig.json', 'package.json'].includes(file),
    );
    for (const file of rootFiles) await cp(path.join(ROOT, file), path.join(copy, file));
    await symlink(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
    await appendFile(
      path.join(copy, 'src/core/clock.ts'),
      '\nexport const plantedUnused = 1;\nexport interface PlantedUnusedShape {\n  n: number;\n}\n',
    );
  }, 60_000);
  afterAll(() => rm(copy, { recursive: true, force: true }));

  it('are none in the tree as it is', async () => {
    expect(await unusedExports(ROOT)).toEqual({ code: 0, unused: [] });
  });

  it('fail the lint when planted: a value and a type that nothing imports are named', async () => {
    const { code, unused } = await unusedExports(copy);
    expect(code).toBe(1);
    expect(unused).toEqual(['src/core/clock.ts: plantedUnused', 'src/core/clock.ts: PlantedUnusedShape']);
  });
});
