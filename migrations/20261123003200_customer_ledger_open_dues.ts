import type { Knex } from 'knex';

// A receivables row's ageing worked out in the row, on any day, without reading invoices: the ledger keeps its
// customer's open balances by due date as two arrays. Before, each row of the page cost an index scan of
// invoices_customer_due (3-4 µs; 50 to 200 per page).
//   customer_ledger.open_due_dates  the distinct due dates of the customer's open invoices (balance > 0), earliest
//                                   first ('{}' when none)
//   customer_ledger.owed_from       owed_from[k]: the open balance due on or after open_due_dates[k]; one element
//                                   more than the dates, 0 ('{0}' when none)
// The balance due on or after a day D is owed_from[width_bucket(D - 1, open_due_dates) + 1]: width_bucket is a binary
// search that counts the dates before D. Each bucket is the difference of two such look-ups (src/queries/receivables.ts).
//
// Kept by statement-level triggers on invoices, which recompute the arrays of the customers a statement touched
// (customer_open_dues(), an index-only scan of invoices_customer_due). A recomputation, unlike a delta, must see what
// other transactions committed: each transaction that changes a customer's invoices holds that customer's ledger row
// locked from the invoice rollup's upsert until it ends; the trigger locks the rows too (no wait then, or it waits
// here) and its UPDATE, a statement of its own, reads in a snapshot taken after those locks were granted.
// Same-event triggers fire in name order: these are named after invoices_rollup_<event> so that they follow it and
// find the ledger row of a customer's first invoice. The bulk-load rule holds (rollup_changes(), rollups_rebuild()).
// Cost, large bench set: about 0.8 ms per statement changing invoices (the other invoice triggers take about 3 ms);
// the page: 50 rows 380 -> 260-280 µs of PostgreSQL CPU, 200 rows of a search 1,280 -> 960 µs; backfill 2.4 s.
//
// rollups_rebuild() is wrapped, not rewritten (the previous function is kept under another name and called first),
// so this composes with any other migration's version of it.
const EVENTS = ['insert', 'update', 'delete'] as const;
const TRANSITION = { insert: 'REFERENCING NEW TABLE AS new_rows', update: 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows', delete: 'REFERENCING OLD TABLE AS old_rows' };

// For the customers in `ledger` (an alias of customer_ledger), their arrays freshly computed.
const SET_OPEN_DUES = (ledger: string) =>
  `(open_due_dates, owed_from) = (SELECT d.open_due_dates, d.owed_from FROM customer_open_dues(${ledger}.customer_id) d)`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE customer_ledger ADD COLUMN open_due_dates date[] NOT NULL DEFAULT '{}',
                                ADD COLUMN owed_from bigint[] NOT NULL DEFAULT '{0}';

    CREATE FUNCTION customer_open_dues(customer uuid, OUT open_due_dates date[], OUT owed_from bigint[]) LANGUAGE sql STABLE AS $$
      SELECT coalesce(array_agg(d.due_date ORDER BY d.due_date), '{}'), coalesce(array_agg(d.owed ORDER BY d.due_date), '{}') || 0::bigint
      FROM (SELECT i.due_date, (sum(sum(i.balance)) OVER (ORDER BY i.due_date DESC))::bigint AS owed
            FROM invoices i WHERE i.customer_id = customer AND i.balance > 0 GROUP BY i.due_date) d
    $$;

    UPDATE customer_ledger l SET ${SET_OPEN_DUES('l')}
    WHERE EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = l.customer_id AND i.balance > 0);

    CREATE FUNCTION invoices_open_dues() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      touched uuid[];
    BEGIN
      EXECUTE format('SELECT array_agg(DISTINCT customer_id) FROM (%s) c', rollup_changes(TG_OP)) INTO touched;
      IF touched IS NULL THEN RETURN NULL; END IF;
      PERFORM 1 FROM customer_ledger WHERE customer_id = ANY (touched) ORDER BY customer_id FOR NO KEY UPDATE;
      UPDATE customer_ledger l SET open_due_dates = d.open_due_dates, owed_from = d.owed_from
      FROM unnest(touched) AS c(id) CROSS JOIN LATERAL customer_open_dues(c.id) d
      WHERE l.customer_id = c.id AND (l.open_due_dates, l.owed_from) IS DISTINCT FROM (d.open_due_dates, d.owed_from);
      RETURN NULL;
    END $fn$;
    ${EVENTS.map((event) => `
    CREATE TRIGGER invoices_rollup_${event}_open_dues AFTER ${event.toUpperCase()} ON invoices ${TRANSITION[event]}
      FOR EACH STATEMENT EXECUTE FUNCTION invoices_open_dues();`).join('')}

    ALTER FUNCTION rollups_rebuild(uuid) RENAME TO rollups_rebuild_but_open_dues;
    CREATE FUNCTION rollups_rebuild(ws uuid) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM rollups_rebuild_but_open_dues(ws);
      -- the ledger rows were written afresh, with no open balances
      UPDATE customer_ledger l SET ${SET_OPEN_DUES('l')}
      WHERE l.workspace_id = ws AND EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = l.customer_id AND i.balance > 0);
    END $fn$;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION rollups_rebuild(uuid);
    ALTER FUNCTION rollups_rebuild_but_open_dues(uuid) RENAME TO rollups_rebuild;
    ${EVENTS.map((event) => `DROP TRIGGER invoices_rollup_${event}_open_dues ON invoices;`).join(' ')}
    DROP FUNCTION invoices_open_dues();
    DROP FUNCTION customer_open_dues(uuid);
    ALTER TABLE customer_ledger DROP COLUMN open_due_dates, DROP COLUMN owed_from;`);
}
