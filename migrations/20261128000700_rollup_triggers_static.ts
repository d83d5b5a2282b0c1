import type { Knex } from 'knex';

// Writes stay cheap (issue 32, point 5): the service's trigger functions ran their statements as dynamic SQL
// (EXECUTE format(..., rollup_changes(TG_OP))), so PostgreSQL parsed and planned each of them on every statement a
// writer made: about 20 plans for one payment (its invoice, its booking, their ledgers and totals), 11.5 ms of a
// one-row insert on 2 cores against 0.3 ms without triggers (bench/ingest/direct-writers.ts). The same statements,
// written out per operation as static SQL, are planned once per trigger and connection and kept (PL/pgSQL compiles a
// trigger function per trigger, so a branch naming old_rows is only planned by the triggers that have it).
//
// This migration rewrites each such function from its current definition: every
// `EXECUTE format($q$ ... %s ... $q$, rollup_changes(TG_OP)) [INTO x];` becomes an IF on TG_OP with the statement
// three times, %s replaced by rollup_changes() of that operation (the same text the dynamic statement ran, the bulk
// load's skip included); a dynamic statement without format() becomes the statement itself. What a function does is
// unchanged, only when its statements are planned.
const FUNCTIONS = [
  'payments_rollup',
  'payments_totals',
  'expenses_totals',
  'customer_ledger_totals',
  'invoices_open_balances',
  'invoices_rollup',
  'invoices_open_dues',
  'bookings_rollup',
  'bookings_vehicles_out',
  'vehicles_state_counts',
  'vehicles_models',
  'payment_slots_days',
  'payment_slots_months',
  'expenses_months',
  'bookings_record_changes',
  'invoices_record_changes',
  'payments_record_changes',
  'customers_booking_refs',
  'vehicles_booking_refs',
];
const OPS = ['INSERT', 'DELETE', 'UPDATE'] as const;

/** `sql` with its one `%s` replaced by `changes` (a format() string: `%%` is a `%`). */
function filled(sql: string, changes: string, name: string): string {
  const parts = sql.split('%s');
  if (parts.length !== 2 || /%[^%]/.test(parts.join('').replaceAll('%%', ''))) {
    throw new Error(`${name}: a dynamic statement this migration does not know (one %s expected): ${sql}`);
  }
  return parts.map((p) => p.replaceAll('%%', '%')).join(changes);
}

function staticBody(name: string, source: string, changes: Record<(typeof OPS)[number], string>): string {
  const branches = (sql: string, into: string | undefined) => {
    const statement = (op: (typeof OPS)[number]) =>
      `${filled(sql, changes[op], name).trim()}${into ? ` ${into}` : ''};`;
    return `IF TG_OP = 'INSERT' THEN\n        ${statement('INSERT')}\n      ELSIF TG_OP = 'DELETE' THEN\n        ${statement('DELETE')}\n      ELSE\n        ${statement('UPDATE')}\n      END IF;`;
  };
  const body = source
    .replace(
      /EXECUTE format\(\$q\$([\s\S]*?)\$q\$, rollup_changes\(TG_OP\)\)\s*(INTO \w+)?;/g,
      (_, sql: string, into?: string) => branches(sql, into),
    )
    .replace(
      /EXECUTE format\('((?:[^']|'')*)', rollup_changes\(TG_OP\)\)\s*(INTO \w+)?;/g,
      (_, sql: string, into?: string) => branches(sql.replaceAll("''", "'"), into),
    )
    .replace(
      /EXECUTE \$q\$([\s\S]*?)\$q\$\s*(INTO \w+)?;/g,
      (_, sql: string, into?: string) => `${sql.trim()}${into ? ` ${into}` : ''};`,
    )
    .replace(
      /EXECUTE '((?:[^']|'')*)'\s*(INTO \w+)?;/g,
      (_, sql: string, into?: string) => `${sql.replaceAll("''", "'")}${into ? ` ${into}` : ''};`,
    );
  if (/\bEXECUTE\b/.test(body) || body === source)
    throw new Error(`${name}: not the function this migration knows: write it anew`);
  return body;
}

export async function up(knex: Knex): Promise<void> {
  // (one query at a time: a migration runs on one connection)
  const changes = {} as Record<(typeof OPS)[number], string>;
  for (const op of OPS) changes[op] = String((await knex.raw('SELECT rollup_changes(?) AS sql', [op])).rows[0].sql);
  for (const name of FUNCTIONS) {
    const { rows } = await knex.raw(
      `SELECT pg_get_functiondef(p.oid) AS def, p.prosrc AS source FROM pg_proc p
       WHERE p.proname = ? AND p.pronamespace = current_schema()::regnamespace AND p.pronargs = 0`,
      [name],
    );
    if (rows.length !== 1) throw new Error(`${name}: not found in this schema`);
    const { def, source } = rows[0] as { def: string; source: string };
    if (def.split(source).length !== 2) throw new Error(`${name}: its definition does not hold its source once`);
    await knex.raw(def.replace(source, () => staticBody(name, source, changes)));
  }
}

export async function down(): Promise<void> {
  throw new Error('20261128000700_rollup_triggers_static cannot be undone (restore a backup)');
}
