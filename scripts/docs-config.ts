import { readFile, writeFile } from 'node:fs/promises';
import { withConfigTable } from './config-doc.js';

/** Writes the configuration table of docs/operations.md from the variables of src/core/config/. */
const operations = new URL('../docs/operations.md', import.meta.url);
await writeFile(operations, withConfigTable(await readFile(operations, 'utf8')));
console.log('wrote the configuration table of docs/operations.md');
