import { variablesOf } from '../src/core/config/kinds.js';
import { CONFIG_TABLE } from '../src/core/config/table.js';

/** Where the generated table stands in docs/operations.md; everything between the two lines is replaced. */
export const TABLE_START = '<!-- The configuration table: `npm run docs:config` writes it from the variables of src/core/config/. -->';
export const TABLE_END = '<!-- End of the configuration table. -->';

function cell(value: string, variable: string): string {
  // A bar would end the cell early and shift every column after it.
  if (value.includes('|')) throw new Error(`${variable}: a "|" in the configuration table breaks its row`);
  return value;
}

/** The configuration table of docs/operations.md: one table per group, in reading order. */
export function configTableMarkdown(): string {
  return Object.values(CONFIG_TABLE)
    .map(({ title, fields }) => {
      const rows = variablesOf(fields).map(
        (variable) =>
          `| \`${variable.name}\` | ${[variable.shown, variable.accepts, variable.doc].map((text) => cell(text, variable.name)).join(' | ')} |`,
      );
      return [`**${title}**`, '', '| variable | default | accepts | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
    })
    .join('\n\n');
}

/** `doc` with the text between the markers replaced by the table as the code has it. */
export function withConfigTable(doc: string): string {
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error('docs/operations.md: the configuration table markers are missing or out of order');
  return `${doc.slice(0, start + TABLE_START.length)}\n\n${configTableMarkdown()}\n\n${doc.slice(end)}`;
}
