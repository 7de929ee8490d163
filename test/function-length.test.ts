import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { functionLengths } from '../scripts/function-lengths.js';

/** Files of src/ allowed over 300 lines, each holding one idea that needs the room (docs/design.md §2). */
const MOST_LONG_FILES = 7;

/** Lines of code (template-literal text not counted) a function of src/ may take. */
const MAX_LINES = 80;

describe('function length in src/', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const lengths = functionLengths(root);

  it(`no function is over ${MAX_LINES} lines of code`, () => {
    expect(lengths.length).toBeGreaterThan(500);
    const long = lengths.filter(({ lines }) => lines > MAX_LINES);
    expect(long, 'cut these into named module-level functions').toEqual([]);
  });

  it('counts the code of a function, not the text of its SQL', () => {
    const tree = mkdtempSync(path.join(os.tmpdir(), 'function-length-'));
    try {
      mkdirSync(path.join(tree, 'src'));
      const sql = Array.from({ length: 100 }, (_, i) => `    select ${i}`).join('\n');
      const code = Array.from({ length: 5 }, (_, i) => `  const n${i} = ${i};`).join('\n');
      writeFileSync(path.join(tree, 'src', 'sample.ts'), `export function query() {\n${code}\n  return \`\n${sql}\n  \`;\n}\n`);
      // 1 + 5 + the two lines that open and close the template + 1: the 100 lines of SQL text do not count.
      expect(functionLengths(tree)).toEqual([{ where: 'src/sample.ts:query', lines: 9 }]);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });

  it('a file over 300 lines is named in docs/design.md, with the one idea that needs the room, and at most seven are', () => {
    const design = readFileSync(path.join(root, 'docs/design.md'), 'utf8');
    const list = design.split('**Files over 300 lines.**')[1]?.split('\n\n')[1] ?? '';
    const named = new Set([...list.matchAll(/^- `([^`]+)`/gm)].map((match) => match[1]));
    const long = readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts'))
      .map((file) => `src/${file}`)
      .filter((file) => readFileSync(path.join(root, file), 'utf8').split('\n').length - 1 > 300);
    expect(long.length).toBeGreaterThan(0);
    expect(long.filter((file) => !named.has(file))).toEqual([]);
    // The list names only files that are long, and stays short: a file that outgrows its idea is split.
    expect([...named].filter((file) => !long.includes(file!))).toEqual([]);
    expect(named.size).toBeLessThanOrEqual(MOST_LONG_FILES);
  });
});
