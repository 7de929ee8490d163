import { readFile, writeFile } from 'node:fs/promises';
import { withConfigTable } from './config-doc.js';

/** Writes the configuration table of docs/operations.md from the variables of src/core/config/. */
const operations = new URL('../docs/operations.md', import.meta.url);
const before = await readFile(operations, 'utf8');
const after = withConfigTable(before);
if (after === before) console.log('the configuration table of docs/operations.md is up to date');
else {
  await writeFile(operations, after);
  console.log('wrote the configuration table of docs/operations.md');
}
