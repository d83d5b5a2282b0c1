// Writes a workspace out as an import document (openapi/import.schema.json), e.g. a `seed large` workspace, to
// measure `fleet-admin import` of a large document: `tsx scripts/export-import-document.ts --workspace large
// --file large.json` (DATABASE_URL, else the embedded database under .data/). Import it into another database:
// the ids are the workspace's own, and an id belongs to one workspace.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { openDatabase } from '../src/db/database.js';
import { loadImportSchema } from '../src/contract/document.js';
import { findWorkspace } from '../src/core/workspaces.js';

const { values } = parseArgs({ options: { workspace: { type: 'string' }, file: { type: 'string' } } });
if (!values.workspace || !values.file)
  throw new Error('usage: tsx scripts/export-import-document.ts --workspace SLUG --file PATH');

const schema = loadImportSchema() as {
  properties: Record<string, { items: { $ref: string } }>;
  $defs: Record<string, { properties: object }>;
};
const snakeCase = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const database = await openDatabase({ schema: 'as-is' });
try {
  const { db } = database;
  const workspace = await findWorkspace(db, values.workspace);
  const out = fs.createWriteStream(values.file);
  const write = (text: string) =>
    new Promise<void>((resolve) => (out.write(text) ? resolve() : out.once('drain', resolve)));
  await write('{');
  let firstKey = true;
  for (const [key, property] of Object.entries(schema.properties)) {
    const table = snakeCase(key);
    const fields = Object.keys(schema.$defs[property.items.$ref.replace('#/$defs/', '')].properties).filter(
      (field) => field !== 'version',
    );
    const { rows: types } = await db.raw(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?`,
      [table],
    );
    const typeOf = new Map<string, string>(
      types.map((t: { column_name: string; data_type: string }) => [t.column_name, t.data_type]),
    );
    const value = (column: string) => {
      const type = typeOf.get(column);
      if (type === 'timestamp with time zone')
        return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
      if (type === 'date') return `${column}::text`;
      return `"${column}"`;
    };
    const object = fields.map((field) => `'${field}', ${value(snakeCase(field))}`).join(', ');
    await write(`${firstKey ? '' : ','}\n"${key}": [`);
    firstKey = false;
    let first = true;
    // Streamed a page at a time: a large workspace does not fit in one result.
    for (let after = '00000000-0000-0000-0000-000000000000'; ;) {
      const { rows } = await db.raw(
        `SELECT id, json_strip_nulls(json_build_object(${object}))::text AS record FROM ${table} WHERE workspace_id = ? AND id > ? ORDER BY id LIMIT 20000`,
        [workspace.id, after],
      );
      for (const row of rows) {
        await write(`${first ? '\n' : ',\n'}${row.record}`);
        first = false;
      }
      if (rows.length < 20000) break;
      after = rows[rows.length - 1].id;
    }
    await write(']');
  }
  await write('\n}\n');
  await new Promise((resolve) => out.end(resolve));
} finally {
  await database.close();
}
