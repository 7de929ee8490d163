import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * The shell examples of a document (docs/client-guide.md): each ```sh block, and the fenced block
 * right after it (blank lines between, nothing else) as the answer it shows. Run in order in one
 * shell, so that a variable or a function of an earlier example reaches the later ones, as it does
 * for a reader who pastes them one after the other.
 */
export interface ShellExample {
  /** The line of the document the block starts on, to name it in a failure. */
  line: number;
  commands: string;
  /** The answer the document shows, or null when none follows the block. */
  answer: string | null;
}

const FENCE = /^```(\w*)\n([\s\S]*?)^```$/gm;

export function shellExamples(markdown: string): ShellExample[] {
  const blocks = [...markdown.matchAll(FENCE)].map((match) => ({
    language: match[1]!,
    body: match[2]!.replace(/\n$/, ''),
    start: match.index,
    end: match.index + match[0].length,
  }));
  const examples: ShellExample[] = [];
  blocks.forEach((block, i) => {
    if (block.language !== 'sh') return;
    const next = blocks[i + 1];
    const adjacent = next !== undefined && next.language !== 'sh' && markdown.slice(block.end, next.start).trim() === '';
    examples.push({
      line: markdown.slice(0, block.start).split('\n').length,
      commands: block.body,
      answer: adjacent ? next.body : null,
    });
  });
  return examples;
}

const MARK = '@@example-answer@@';

/** Runs the examples in order in one bash, with `env` added to this process's; returns what each printed. */
export async function runShellExamples(examples: ShellExample[], env: Record<string, string>, timeoutMs = 120_000): Promise<string[]> {
  const script = examples.map((example) => `printf '\\n${MARK}\\n'\n${example.commands}\n`).join('');
  const { stdout } = await promisify(execFile)('bash', ['-c', script], {
    env: { ...process.env, ...env },
    timeout: timeoutMs,
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout.split(`\n${MARK}\n`).slice(1);
}

/** Headers the documented answers leave out: they differ on every request or say nothing of the API. */
const UNSHOWN_HEADERS = /^(date|connection|keep-alive|content-length|transfer-encoding):.*\n?/gim;
/** Ids, times, payment intents and months: different on every run and every day. */
const VOLATILE =
  /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z|pi_sim_[0-9a-f]+|"month":"\d{4}-\d{2}"/g;

/**
 * The answers with what differs between runs replaced by `<n>`, numbered by first appearance over
 * all of them: two answers that name the same coupon or time still name the same `<n>`, so an id
 * that should come from an earlier step is checked to be that one.
 */
export function comparable(answers: string[]): string[] {
  const seen = new Map<string, string>();
  return answers.map((answer) =>
    answer
      .replace(/\r\n/g, '\n')
      .replace(UNSHOWN_HEADERS, '')
      .trim()
      .replace(VOLATILE, (token) => {
        if (!seen.has(token)) seen.set(token, `<${seen.size + 1}>`);
        return seen.get(token)!;
      }),
  );
}

/** A ```ts block of a document, and the file its first line names (a `// <path>.ts` comment), if it names one. */
export interface TypeScriptBlock {
  line: number;
  file: string | null;
  /** The block's lines, the naming comment included. */
  lines: string[];
}

export function typescriptBlocks(markdown: string): TypeScriptBlock[] {
  return [...markdown.matchAll(FENCE)]
    .filter((match) => match[1] === 'ts')
    .map((match) => {
      const lines = match[2]!.trimEnd().split('\n');
      return {
        line: markdown.slice(0, match.index).split('\n').length,
        file: /^\/\/ (\S+\.ts)$/.exec(lines[0]!)?.[1] ?? null,
        lines,
      };
    });
}

/**
 * What of an excerpt is not in the file it names: its lines must be there in order, trimmed, so
 * that an excerpt from inside a block may lose its indentation. An empty list when it all is.
 */
export function excerptProblems(block: TypeScriptBlock, fileText: string): string[] {
  const source = fileText.split('\n').map((text) => text.trim());
  let at = 0;
  for (const text of block.lines.slice(1).map((line) => line.trim())) {
    if (text === '') continue;
    const found = source.indexOf(text, at);
    if (found === -1) return [`${block.file}: no line "${text}" after line ${at} of it`];
    at = found + 1;
  }
  return [];
}
