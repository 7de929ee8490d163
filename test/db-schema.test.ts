import { fileURLToPath } from 'node:url';
import pg from 'pg';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { createTestDatabaseUrl } from './support/harness.js';

const SCHEMA_FILE = fileURLToPath(new URL('../src/db/schema.ts', import.meta.url));

interface ColumnShape {
  /** The select type admits null. */
  nullable: boolean;
  /** An insert may leave the column out (a default, an identity, a generated id). */
  optionalOnInsert: boolean;
}

type Tables = Record<string, Record<string, ColumnShape>>;

/** The first type argument at the top level of `Name<A, B, C>`, i.e. what a select returns. */
function selectPart(text: string): string {
  const generic = /^(ColumnType|Generated|Defaulted)<(.*)>$/s.exec(text.trim());
  if (!generic) return text;
  let depth = 0;
  const inner = generic[2]!;
  for (let i = 0; i < inner.length; i++) {
    if (inner[i] === '<') depth++;
    else if (inner[i] === '>') depth--;
    else if (inner[i] === ',' && depth === 0) return inner.slice(0, i);
  }
  return inner;
}

/** The tables and columns src/db/schema.ts declares, read from its syntax (interface DB and each table's interface). */
function declaredTables(): Tables {
  const source = ts.createSourceFile(SCHEMA_FILE, ts.sys.readFile(SCHEMA_FILE)!, ts.ScriptTarget.ES2022, true);
  const interfaces = new Map<string, ts.InterfaceDeclaration>();
  source.forEachChild((node) => {
    if (ts.isInterfaceDeclaration(node)) interfaces.set(node.name.text, node);
  });
  const members = (declaration: ts.InterfaceDeclaration) =>
    declaration.members
      .filter(ts.isPropertySignature)
      .map((member) => ({ name: member.name.getText(source), type: member.type!.getText(source) }));
  const tables: Tables = {};
  for (const table of members(interfaces.get('DB')!)) {
    const columns: Record<string, ColumnShape> = {};
    for (const column of members(interfaces.get(table.type)!)) {
      const select = selectPart(column.type);
      columns[column.name] = {
        nullable: /\bnull\b/.test(select),
        optionalOnInsert: /^(Generated|Defaulted)</.test(column.type) || /^ColumnType<[^,]+,[^,]*\bundefined\b/.test(column.type),
      };
    }
    tables[table.name] = columns;
  }
  return tables;
}

async function migratedTables(): Promise<Tables> {
  const client = new pg.Client({ connectionString: await createTestDatabaseUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ table_name: string; column_name: string; is_nullable: string; has_default: boolean }>(
      `select table_name, column_name, is_nullable, (column_default is not null or is_identity = 'YES') as has_default
         from information_schema.columns where table_schema = 'public' order by table_name, ordinal_position`,
    );
    const tables: Tables = {};
    for (const row of rows) {
      const nullable = row.is_nullable === 'YES';
      (tables[row.table_name] ??= {})[row.column_name] = { nullable, optionalOnInsert: nullable || row.has_default };
    }
    return tables;
  } finally {
    await client.end();
  }
}

describe('src/db/schema.ts', () => {
  it('declares exactly the tables and columns the migrations make, with their nullability and defaults', async () => {
    const declared = declaredTables();
    const migrated = await migratedTables();
    // src/db/schema.ts is written by hand, beside the migration that changes the tables.
    const stale = (what: string) =>
      `src/db/schema.ts and db/migrations/ disagree on ${what}: src/db/schema.ts is written by hand, make it match the migrations`;
    expect(Object.keys(declared).sort(), stale('the tables')).toEqual(Object.keys(migrated).sort());
    for (const [table, columns] of Object.entries(migrated)) {
      expect({ table, columns: Object.keys(declared[table]!).sort() }, stale(`the columns of ${table}`)).toEqual({
        table,
        columns: Object.keys(columns).sort(),
      });
      for (const [column, shape] of Object.entries(columns)) {
        const mine = declared[table]![column]!;
        expect({ column: `${table}.${column}`, nullable: mine.nullable }, stale(`whether ${table}.${column} may be null`)).toEqual({
          column: `${table}.${column}`,
          nullable: shape.nullable,
        });
        // A nullable column may be declared required on insert (the code always sets it); a defaulted one must be optional.
        if (!shape.nullable) {
          expect(
            { column: `${table}.${column}`, optionalOnInsert: mine.optionalOnInsert },
            stale(`whether an insert may leave out ${table}.${column}`),
          ).toEqual({
            column: `${table}.${column}`,
            optionalOnInsert: shape.optionalOnInsert,
          });
        }
      }
    }
  });
});
