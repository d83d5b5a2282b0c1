import type { Knex } from 'knex';

// A function that runs as its owner (SECURITY DEFINER) finds what it names through its own search_path. Ending that
// path with this schema was not enough: an unqualified call is matched against every schema of the path at once, and a
// function of the exact argument types wins over a polymorphic built-in whatever the order (array_agg(uuid) planted in
// a writable public beat pg_catalog's array_agg(anynonarray), and ran as the owner). So every definer now searches
// pg_catalog and pg_temp only (pg_temp is never searched for functions or operators, and last for tables), and names
// every table with this schema, as their bodies already do: nothing outside pg_catalog is found unqualified. Frozen
// SQL, imports nothing from src/; test/db/definers.test.ts keeps every later definer to the same rule.
const DEFINERS = ['workspace_data_version_bump()', 'workspace_data_versions_made()', 'workspaces_payment_months()'];

export async function up(knex: Knex): Promise<void> {
  for (const fn of DEFINERS) await knex.raw(`ALTER FUNCTION ${fn} SET search_path = pg_catalog, pg_temp`);
}

export async function down(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  for (const fn of DEFINERS) await knex.raw(`ALTER FUNCTION ${fn} SET search_path = pg_catalog, ${S}, pg_temp`);
}
