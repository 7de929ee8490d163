import { writeFile } from 'node:fs/promises';
import { printedSchema } from '../src/graphql/schema.js';

const target = new URL('../schema/schema.graphql', import.meta.url);
await writeFile(target, printedSchema());
console.log('wrote schema/schema.graphql');
