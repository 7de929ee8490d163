/**
 * The length of every function in src/, measured on the TypeScript syntax tree: a long factory
 * hides inner functions that no test or stack trace can name. Lines inside template literals do
 * not count, so a function that is mostly its SQL text is measured by its code alone.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface FunctionLength {
  /** `src/db/pool.ts:createGuardedPool` (an unnamed function: its line). */
  where: string;
  lines: number;
}

function filesUnder(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) return filesUnder(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  return `(function at line ${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1})`;
}

/** The lines of `node` that hold code: those not wholly inside a template literal. */
function codeLines(node: ts.Node, source: ts.SourceFile): number {
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line;
  const first = lineOf(node.getStart(source));
  const last = lineOf(node.getEnd());
  const textLines = new Set<number>();
  const visit = (child: ts.Node): void => {
    if (ts.isTemplateLiteral(child)) {
      // The lines after the opening backquote up to the closing one are text, not code.
      for (let line = lineOf(child.getStart(source)) + 1; line < lineOf(child.getEnd()); line++) textLines.add(line);
    }
    ts.forEachChild(child, visit);
  };
  visit(node);
  return last - first + 1 - textLines.size;
}

/** Every function of the .ts files under `root`/src, with its length in lines of code. */
export function functionLengths(root: string): FunctionLength[] {
  const lengths: FunctionLength[] = [];
  for (const file of filesUnder(path.join(root, 'src'))) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const relative = path.relative(root, file);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
        const declaration = node as ts.FunctionLikeDeclaration;
        lengths.push({ where: `${relative}:${nameOf(declaration, source)}`, lines: codeLines(declaration, source) });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return lengths;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const longest = functionLengths(process.cwd()).sort((a, b) => b.lines - a.lines);
  for (const { where, lines } of longest.slice(0, Number(process.argv[2] ?? 20))) console.log(`${lines}\t${where}`);
}
