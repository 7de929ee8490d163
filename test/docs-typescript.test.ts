import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { excerptProblems, typescriptBlocks, type TypeScriptBlock } from './support/doc-examples.js';
import { spawnRecorded } from './support/processes.js';
import { captureOutput } from './support/scripts.js';

/**
 * Every TypeScript block of the documentation compiles. The client guide's blocks are a frontend's
 * files: they are written into a frontend project of their own, beside a copy of this server's
 * schema at the path the guide's codegen.ts names, with src/client/mutate.ts copied in as the
 * guide says; the guide's codegen config generates the frontend's gql folder, and the TypeScript
 * compiler checks the whole with the generated types. Every other block is an excerpt of a
 * repository file and must be found in it line for line (the file itself is what `npm run
 * typecheck` compiles).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT_GUIDE = 'docs/client-guide.md';
/** The CLI the guide's package.json installs, as npm links it. */
const CODEGEN_BIN = path.join(ROOT, 'node_modules/.bin/graphql-codegen');

/**
 * A misuse of the generated types beside the guide's files: it must be refused, or the compiler is
 * seeing `any` and the check proves nothing.
 */
const MISUSE = `import { mutate } from './mutate';
import { IssueCoupon } from './coupons';

export const misspelt = () => mutate(IssueCoupon, { input: { campaignID: 'x' } }, { url: 'http://localhost' });
`;

const read = (file: string) => readFile(path.join(ROOT, file), 'utf8');

async function documents(): Promise<string[]> {
  const docs = (await readdir(path.join(ROOT, 'docs'))).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
  return ['README.md', ...docs.sort()];
}

/** Writes the frontend the client guide describes into `root`; returns its folder. */
async function writeFrontend(root: string, blocks: TypeScriptBlock[]): Promise<string> {
  const frontend = path.join(root, 'frontend');
  await mkdir(path.join(frontend, 'src'), { recursive: true });
  await mkdir(path.join(root, 'mutation-backend', 'schema'), { recursive: true });
  await copyFile(path.join(ROOT, 'schema/schema.graphql'), path.join(root, 'mutation-backend/schema/schema.graphql'));
  // The packages the guide's package.json lists, and TypeScript's view of them, from this checkout.
  await symlink(path.join(ROOT, 'node_modules'), path.join(frontend, 'node_modules'), 'dir');
  await copyFile(path.join(ROOT, 'src/client/mutate.ts'), path.join(frontend, 'src/mutate.ts'));
  for (const block of blocks) await writeFile(path.join(frontend, block.file!), `${block.lines.join('\n')}\n`);
  await writeFile(path.join(frontend, 'src/misuse.ts'), MISUSE);
  return frontend;
}

async function runCodegen(frontend: string): Promise<{ code: number | null; output: string }> {
  const child = spawnRecorded(process.execPath, [CODEGEN_BIN, '--config', 'codegen.ts'], {
    cwd: frontend,
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = captureOutput(child);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, output: output() };
}

async function sourcesOf(frontend: string): Promise<string[]> {
  const entries = await readdir(path.join(frontend, 'src'), { recursive: true, withFileTypes: true });
  const sources = entries.filter((entry) => entry.isFile() && entry.name.endsWith('.ts'));
  return [path.join(frontend, 'codegen.ts'), ...sources.map((entry) => path.join(entry.parentPath, entry.name))];
}

/** The compiler's complaints, as `file:line: message` with the file relative to the frontend. */
function typeErrors(frontend: string, files: string[]): string[] {
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    skipLibCheck: true,
  });
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    if (!diagnostic.file) return message;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
    return `${path.relative(frontend, diagnostic.file.fileName)}:${line + 1}: ${message}`;
  });
}

describe('the TypeScript blocks of the documentation', () => {
  let root: string;
  let frontend: string;
  let guideBlocks: TypeScriptBlock[];
  let codegen: { code: number | null; output: string };

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'docs-typescript-'));
    guideBlocks = typescriptBlocks(await read(CLIENT_GUIDE));
    frontend = await writeFrontend(root, guideBlocks);
    codegen = await runCodegen(frontend);
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("each of the client guide's blocks names the frontend file it is, and codegen.ts is one of them", () => {
    const files = guideBlocks.map((block) => block.file);
    expect(guideBlocks.filter((block) => block.file === null).map((block) => `line ${block.line}`)).toEqual([]);
    expect(files).toContain('codegen.ts');
    expect(new Set(files).size).toBe(files.length);
  });

  it("the guide's codegen config generates the typed documents from this server's schema", () => {
    expect(codegen.code, codegen.output).toBe(0);
  });

  it('the frontend compiles with the generated types, and a misspelt variable does not', async () => {
    expect(codegen.code, codegen.output).toBe(0);
    const errors = typeErrors(frontend, await sourcesOf(frontend));
    expect(errors.filter((error) => !error.startsWith('src/misuse.ts:'))).toEqual([]);
    expect(errors.filter((error) => error.startsWith('src/misuse.ts:')).join('\n')).toMatch(/campaignID/);
  });

  it('every other block is an excerpt of the repository file it names, line for line', async () => {
    const problems: string[] = [];
    for (const doc of (await documents()).filter((name) => name !== CLIENT_GUIDE)) {
      for (const block of typescriptBlocks(await read(doc))) {
        if (block.file === null || !/^(src|test|scripts)\//.test(block.file)) {
          problems.push(`${doc}:${block.line}: a block that names no repository file ("${block.lines[0]}")`);
          continue;
        }
        problems.push(...excerptProblems(block, await read(block.file)).map((problem) => `${doc}:${block.line}: ${problem}`));
      }
    }
    expect(problems).toEqual([]);
  });
});
