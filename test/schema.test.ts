import { readFile } from 'node:fs/promises';
import { generate } from '@graphql-codegen/cli';
import { describe, expect, it } from 'vitest';
import codegenConfig from '../codegen.js';
import { printedSchema } from '../src/graphql/schema.js';

const read = (path: string) => readFile(new URL(`../${path}`, import.meta.url), 'utf8');

describe('committed schema and generated files', () => {
  it('schema/schema.graphql is the schema the code builds (npm run codegen rewrites it)', async () => {
    expect(await read('schema/schema.graphql'), 'schema/schema.graphql differs from the schema the code builds: run npm run codegen').toBe(
      printedSchema(),
    );
  });

  it('test/generated matches what codegen makes from schema/operations (npm run codegen)', async () => {
    const outputs = await generate({ ...codegenConfig, cwd: new URL('..', import.meta.url).pathname, silent: true }, false).catch(
      (error: unknown) => {
        throw new Error(
          `codegen cannot build test/generated/ from schema/schema.graphql and schema/operations/ (${(error as Error).message.trim()}). ` +
            'If the schema changed, run npm run codegen; if an operation is wrong, fix it in schema/operations/ and run npm run codegen.',
        );
      },
    );
    expect(outputs.length).toBeGreaterThan(0);
    for (const output of outputs) {
      expect(
        await read(output.filename),
        `${output.filename} differs from what codegen makes of schema/schema.graphql and schema/operations/: run npm run codegen`,
      ).toBe(output.content);
    }
  });
});
