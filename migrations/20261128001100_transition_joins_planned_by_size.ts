import type { Knex } from 'knex';

// 20261128000700 made the trigger functions' statements static, and with them the update branches that join a
// statement's old and new rows on id (20261123002100 had run those through EXECUTE for this reason). A static
// statement is planned once per connection with the transition tables it met first, usually a one-row write, so
// the join is cached as a nested loop and is quadratic in the rows a later statement updates: 282 bookings updated
// by one batch took 22 ms in this join alone, 5,000 renamed customers would take seconds.
//
// This migration rewrites every statement that joins `new_rows n` to `old_rows o ON o.id = n.id`, from the current
// definition: a statement of one row keeps its cached plan (the one-row writer's speed), a larger one runs the same
// text through EXECUTE, planned with the real row counts (a hash join). Same statements, same results.
const FUNCTIONS = [
  'bookings_record_changes',
  'invoices_record_changes',
  'payments_record_changes',
  'customers_booking_refs',
  'vehicles_booking_refs',
  'upkeep_queue_customers',
];
const JOINED = /^([ \t]*)((?:INSERT INTO|SELECT)\b[^;]*?\bJOIN old_rows o ON o\.id = n\.id\b[^;]*);/gm;

function sizedBody(name: string, source: string): string {
  if (source.includes('$q$')) throw new Error(`${name}: not the function this migration knows: write it anew`);
  let found = 0;
  const body = source.replace(JOINED, (_, indent: string, statement: string) => {
    found++;
    const [, sql, into] = /^([\s\S]*?)(\s+INTO \w+)?$/.exec(statement.trim()) as unknown as [
      string,
      string,
      string | undefined,
    ];
    return (
      `${indent}IF (SELECT count(*) FROM new_rows) < 2 THEN\n${indent}  ${sql}${into ?? ''};\n` +
      `${indent}ELSE\n${indent}  EXECUTE $q$${sql}$q$${into ?? ''};\n${indent}END IF;`
    );
  });
  if (found !== 1) throw new Error(`${name}: ${found} joined statements where this migration knows one: write it anew`);
  return body;
}

export async function up(knex: Knex): Promise<void> {
  // (one query at a time: a migration runs on one connection)
  for (const name of FUNCTIONS) {
    const { rows } = await knex.raw(
      `SELECT pg_get_functiondef(p.oid) AS def, p.prosrc AS source FROM pg_proc p
       WHERE p.proname = ? AND p.pronamespace = current_schema()::regnamespace AND p.pronargs = 0`,
      [name],
    );
    if (rows.length !== 1) throw new Error(`${name}: not found in this schema`);
    const { def, source } = rows[0] as { def: string; source: string };
    if (def.split(source).length !== 2) throw new Error(`${name}: its definition does not hold its source once`);
    await knex.raw(def.replace(source, () => sizedBody(name, source)));
  }
}

export async function down(): Promise<void> {
  throw new Error('20261128001100_transition_joins_planned_by_size cannot be undone (restore a backup)');
}
