import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedIfEmpty } from '../src/db/seed.js';
import { schema } from '../src/graphql/schema.js';
import {
  comparable,
  excerptProblems,
  runShellExamples,
  shellExamples,
  typescriptBlocks,
  type ShellExample,
} from './support/doc-examples.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';

/**
 * The documentation against the repository: links lead somewhere, the design sections the code
 * cites exist, and the files and commands the docs name are there.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DESIGN = 'docs/design.md';
/** The sections of docs/design.md, in order; comments cite them as "docs/design.md §N". */
const DESIGN_SECTIONS = 11;

const read = (file: string) => readFile(path.join(ROOT, file), 'utf8');

async function markdownFiles(): Promise<string[]> {
  const docs = (await readdir(path.join(ROOT, 'docs'))).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
  return ['README.md', ...docs.sort()];
}

/** The text outside fenced code blocks. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, '');
}

/** GitHub's anchor of a heading: lower case, punctuation (§ included) dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

function headings(markdown: string): string[] {
  return [...prose(markdown).matchAll(/^#{1,6} (.+)$/gm)].map((match) => match[1]!.trim());
}

/** Relative links of a markdown file: `[text](target)` that is not a URL. */
function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!).filter((target) => !/^[a-z]+:/i.test(target));
}

/** Files in src/ and db/ (and the CI configuration) that cite the design document. */
async function citingFiles(): Promise<string[]> {
  const found: string[] = ['.ci/run', '.dependency-cruiser.cjs'];
  for (const top of ['src', 'db']) {
    for (const entry of await readdir(path.join(ROOT, top), { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) found.push(path.relative(ROOT, path.join(entry.parentPath, entry.name)));
    }
  }
  return found;
}

/** The TypeScript files of src/, test/ and scripts/ (generated code aside), as repository paths. */
async function sourceFiles(): Promise<string[]> {
  const found: string[] = [];
  for (const top of ['src', 'test', 'scripts']) {
    for (const entry of await readdir(path.join(ROOT, top), { recursive: true, withFileTypes: true })) {
      const file = path.relative(ROOT, path.join(entry.parentPath, entry.name));
      if (entry.isFile() && file.endsWith('.ts') && !file.startsWith('test/generated/')) found.push(file);
    }
  }
  return found;
}

/** The text of a file's comments: `// …` lines and `/* … *\/` blocks (a `//` inside a URL is skipped). */
function commentsOf(source: string): string[] {
  return [...source.matchAll(/(?<![:\w'"`])\/\/[^\n]*|\/\*[\s\S]*?\*\//g)].map((match) => match[0]);
}

/** `{a,b}` in a path stands for each of its parts. */
function expandBraces(candidate: string): string[] {
  const match = /\{([^{}]+)\}/.exec(candidate);
  if (!match) return [candidate];
  return match[1]!.split(',').flatMap((part) => expandBraces(candidate.replace(match[0], part)));
}

describe('the documentation', () => {
  it('links only to files and headings that exist', async () => {
    const broken: string[] = [];
    for (const file of await markdownFiles()) {
      for (const link of relativeLinks(await read(file))) {
        const [target, anchor] = link.split('#') as [string, string | undefined];
        const resolved = target === '' ? file : path.normalize(path.join(path.dirname(file), target));
        if (!existsSync(path.join(ROOT, resolved))) {
          broken.push(`${file}: ${link} (no file ${resolved})`);
          continue;
        }
        if (
          anchor !== undefined &&
          !headings(await read(resolved))
            .map(anchorOf)
            .includes(anchor)
        ) {
          broken.push(`${file}: ${link} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('the README links every document in docs/', async () => {
    const links = new Set(relativeLinks(await read('README.md')).map((link) => link.split('#')[0]));
    const docs = (await markdownFiles()).filter((file) => file.startsWith('docs/'));
    expect(docs.length).toBeGreaterThanOrEqual(5);
    expect(docs.filter((file) => !links.has(file))).toEqual([]);
  });

  it(`${DESIGN} has the sections §1 to §${DESIGN_SECTIONS}, in order, and every section the code cites`, async () => {
    const sections = headings(await read(DESIGN))
      .map((heading) => /^§(\d+) /.exec(heading)?.[1])
      .filter((number) => number !== undefined)
      .map(Number);
    expect(sections).toEqual(Array.from({ length: DESIGN_SECTIONS }, (_, i) => i + 1));
    const cited: string[] = [];
    for (const file of await citingFiles()) {
      for (const match of (await read(file)).matchAll(/docs\/design\.md §(\d+)/g)) cited.push(`${file}: §${match[1]}`);
    }
    expect(cited.length).toBeGreaterThan(10);
    expect(cited.filter((citation) => !sections.includes(Number(citation.split('§')[1])))).toEqual([]);
  });

  it('names only repository paths that exist', async () => {
    const ignored = (await read('.gitignore')).split('\n').filter((line) => line.includes('/') && !line.startsWith('#'));
    const missing: string[] = [];
    let checked = 0;
    for (const file of await markdownFiles()) {
      for (const match of prose(await read(file)).matchAll(/`((?:src|db|schema|scripts|test|docs)\/[^`\s]*)`/g)) {
        for (const candidate of expandBraces(match[1]!)) {
          if (/[<>*…]/.test(candidate) || ignored.some((prefix) => candidate.startsWith(prefix))) continue;
          checked++;
          if (!existsSync(path.join(ROOT, candidate))) missing.push(`${file}: ${candidate}`);
        }
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(missing).toEqual([]);
  });

  it('names in code comments only src/ and test/ paths that exist, with no line numbers', async () => {
    const problems: string[] = [];
    let checked = 0;
    for (const file of await sourceFiles()) {
      for (const comment of commentsOf(await read(file))) {
        for (const match of comment.matchAll(/(?<![\w./-])((?:src|test)\/[\w./{},-]*[\w/}])(:\d+)?/g)) {
          for (const candidate of expandBraces(match[1]!)) {
            checked++;
            if (!existsSync(path.join(ROOT, candidate))) problems.push(`${file}: ${candidate} does not exist`);
          }
          // A line number drifts with every edit above it: name the file and the function instead.
          if (match[2]) problems.push(`${file}: ${match[0]} names a line`);
        }
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(problems).toEqual([]);
  });

  it('a test file that replaces a module (vi.mock) is named *.isolated.test.ts, the files vitest.config.ts gives a module graph of their own', async () => {
    const mocking = [];
    for (const file of (await sourceFiles()).filter((name) => name.endsWith('.test.ts'))) {
      if (/\bvi\.(do)?[mM]ock\(/.test(await read(file))) mocking.push(file);
    }
    expect(mocking.length).toBeGreaterThan(0);
    expect(mocking.filter((file) => !file.endsWith('.isolated.test.ts'))).toEqual([]);
  });

  it('the README stays under 200 lines: detail goes to docs/', async () => {
    expect((await read('README.md')).trimEnd().split('\n').length).toBeLessThan(200);
  });

  it('names only npm scripts that exist', async () => {
    const scripts = Object.keys((JSON.parse(await read('package.json')) as { scripts: Record<string, string> }).scripts);
    const unknown: string[] = [];
    for (const file of await markdownFiles()) {
      for (const match of (await read(file)).matchAll(/npm run (?:-s )?([\w:-]+)/g)) {
        if (!scripts.includes(match[1]!)) unknown.push(`${file}: npm run ${match[1]}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('the client guide names every root field of the schema in its Operations table', async () => {
    const guide = await read('docs/client-guide.md');
    const sections = guide.split(/^## Operations$/m);
    expect(sections, 'docs/client-guide.md has exactly one "## Operations" section').toHaveLength(2);
    const rows = sections[1]!
      .split(/^## /m)[0]!
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1]!);
    const named = new Set(rows.flatMap((cell) => [...cell.matchAll(/`(\w+)[(`]/g)].map((match) => match[1]!)));
    const roots = [schema.getQueryType()!, schema.getMutationType()!].flatMap((type) => Object.keys(type.getFields()));
    expect(roots.length).toBeGreaterThanOrEqual(20);
    expect(
      roots.filter((field) => !named.has(field)),
      'root fields missing from the Operations table of docs/client-guide.md: add a row saying who may call each',
    ).toEqual([]);
  });
});

describe("the client guide's shell examples", () => {
  const GUIDE = 'docs/client-guide.md';
  /** The examples a reader runs: not the ones that start a server or name the servers' addresses. */
  const startsOrNamesAServer = (example: ShellExample) => /\bnpm start\b/.test(example.commands) || /^API=/m.test(example.commands);
  let examples: ShellExample[];
  let api: ServedBackend;
  let secured: ServedBackend;

  beforeAll(async () => {
    const all = shellExamples(await read(GUIDE));
    examples = all.filter((example) => !startsOrNamesAServer(example));
    // The second server as the guide starts it: its own secret and origins, on the first one's database.
    const second = all.find((example) => /\bnpm start\b/.test(example.commands))!.commands;
    const setting = (name: string) => new RegExp(`\\b${name}=(\\S+)`).exec(second)![1]!;
    api = await serveTestBackend({ env: { NODE_ENV: 'development' } });
    await seedIfEmpty(api.database.db);
    secured = await serveTestBackend({
      databaseUrl: api.databaseUrl,
      env: { NODE_ENV: 'development', ACTION_SECRET: setting('ACTION_SECRET'), CORS_ORIGINS: setting('CORS_ORIGINS') },
    });
  }, 60_000);

  afterAll(async () => {
    await secured?.close();
    await api?.close();
  });

  it("the README's first command names the address GraphiQL is served at", async () => {
    const quickStart = /```sh\n([\s\S]*?)```/.exec(await read('README.md'))![1]!;
    const graphiql = /GraphiQL at http:\/\/localhost:4000(\/\S*)/.exec(quickStart)?.[1];
    expect(graphiql, 'the README names where GraphiQL is').toBeDefined();
    // Not followed: a browser sent on from /graphql would hide that the README names the wrong address.
    const response = await fetch(`${api.origin}${graphiql}`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await response.text()).toMatch(/graphiql/i);
  });

  it('run in order on a freshly seeded database and answer what the guide shows, ids and times aside', async () => {
    const shown = examples.filter((example) => example.answer !== null);
    expect(shown.length, `${GUIDE}: the shell examples with an answer`).toBeGreaterThanOrEqual(12);
    const printed = await runShellExamples(examples, { API: api.origin, SECURED: secured.origin });
    const expected = comparable(examples.map((example) => example.answer ?? ''));
    const actual = comparable(printed);
    const differences = examples
      .map((example, i) => ({
        where: `${GUIDE}:${example.line}`,
        shown: expected[i],
        printed: actual[i],
        hasAnswer: example.answer !== null,
      }))
      .filter(({ shown, printed, hasAnswer }) => hasAnswer && shown !== printed)
      .map(({ where, shown, printed }) => ({ where, shown, printed }));
    expect(differences).toEqual([]);
  });
});

describe('the chapter on adding an operation', () => {
  const CHAPTER = 'docs/adding-an-operation.md';

  it('shows only code that is in the file each snippet names, line for line and in order', async () => {
    const blocks = typescriptBlocks(await read(CHAPTER));
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const problems: string[] = [];
    for (const block of blocks) {
      if (block.file === null || !/^(src|test)\//.test(block.file)) {
        problems.push(`the snippet at line ${block.line} starts "${block.lines[0]}", not "// <the file it comes from>"`);
        continue;
      }
      problems.push(...excerptProblems(block, await read(block.file)));
    }
    expect(problems).toEqual([]);
  });

  it('names the migration a new table would be: the next number after the last in db/migrations/', async () => {
    const numbers = (await readdir(path.join(ROOT, 'db/migrations')))
      .map((name) => Number(/^(\d+)_/.exec(name)?.[1]))
      .filter(Number.isFinite);
    const next = String(Math.max(...numbers) + 1).padStart(3, '0');
    const named = [...(await read(CHAPTER)).matchAll(/db\/migrations\/(\d{3})_<what>\.sql/g)].map((match) => match[1]);
    expect(named.length).toBeGreaterThanOrEqual(1);
    expect(named.filter((number) => number !== next)).toEqual([]);
  });
});
