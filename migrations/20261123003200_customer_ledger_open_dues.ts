import type { Knex } from 'knex';

// A receivables row's ageing worked out in the row, on any day, without reading invoices: the ledger keeps its
// customer's open balances by due date as two arrays. Before, each row of the page cost an index scan of
// invoices_customer_due (3-4 µs; 50 to 200 per page).
//   customer_ledger.open_due_dates  the distinct due dates of the customer's open invoices (balance > 0), earliest
//                                   first ('{}' when none)
//   customer_ledger.owed_from       owed_from[k]: the open balance due on or after open_due_dates[k]; one element
//                                   more than the dates, 0 ('{0}' when none)
// The balance due on or after a day D is owed_from[width_bucket(D - 1, open_due_dates) + 1]: width_bucket is a
// binary search that counts the dates before D. Each bucket is the difference of two such look-ups
// (src/queries/receivables.ts).
//
// Kept by statement-level triggers on invoices, which recompute the arrays of the customers a statement touched
// (customer_open_dues(), an index-only scan of invoices_customer_due). A recomputation, unlike a delta, must see what
// other transactions committed: each transaction that changes a customer's invoices holds that customer's ledger row
// locked from the invoice rollup's upsert until it ends, and the trigger's UPDATE, a statement of its own, reads in
// a snapshot taken after that lock was granted. The rollup (invoices_rollup, no HAVING) upserts every customer a
// statement touched, even with all-zero deltas (a due date moved), so today the trigger's own lock (FOR NO KEY
// UPDATE) never waits and no test can show it; it is kept so that the recomputation stays exact if the rollup ever
// skips a customer whose deltas are all zero. Same-event triggers fire in name order: these are named after
// invoices_rollup_<event> so that they follow it and find the ledger row of a customer's first invoice. The
// bulk-load rule holds (rollup_changes(), rollups_rebuild()).
//
// Cost on writes: each statement changing invoices recomputes the whole arrays of the customers it touched, so it
// grows with a customer's open due dates. Large bench set: about 0.8 ms per statement (the other invoice triggers
// take about 3 ms). A customer with 2,000 open due dates (arrays of 8 kB and 6.6 kB, stored out of line): an invoice
// update 16.4 ms against 4.7 ms without this trigger; a typical one with 5: 4.4 against 3.7-4.2 ms. The arrays-only
// UPDATE of the ledger writes no workspace_totals row: customer_ledger_totals skips all-zero deltas (below).
// On reads: the page, 50 rows 380 -> 260-280 µs of PostgreSQL CPU, 200 rows of a search 1,280 -> about 1,100 µs.
//
// Deploy: the migration runs in one transaction, and ALTER TABLE holds an exclusive lock on customer_ledger until
// it commits, so receivables pages, invoice writes and renames of customers wait for the backfill (1.4-2.4 s on the
// large bench set). The backfilled rows' pages are no longer all-visible: a walk of customer_ledger_order is
// index-only again once VACUUM (autovacuum, or by hand) has passed.
//
// rollups_rebuild() is wrapped, not rewritten (the previous function is kept under another name and called first),
// so this composes with any other migration's version of it; the wrapper refreshes every ledger row of the workspace
// whose arrays differ from a fresh computation, whatever the previous function left in them.
const EVENTS = ['insert', 'update', 'delete'] as const;
const TRANSITION = {
  insert: 'REFERENCING NEW TABLE AS new_rows',
  update: 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows',
  delete: 'REFERENCING OLD TABLE AS old_rows',
};

// The arrays of the customers `c` (a FROM item with a column id) that differ from a fresh computation, written.
const REFRESH_OPEN_DUES = (customers: string) => `
      UPDATE customer_ledger l SET open_due_dates = d.open_due_dates, owed_from = d.owed_from
      FROM ${customers} CROSS JOIN LATERAL customer_open_dues(c.id) d
      WHERE l.customer_id = c.id AND (l.open_due_dates, l.owed_from) IS DISTINCT FROM (d.open_due_dates, d.owed_from)`;

// customer_ledger_totals (20261122000400) adds a statement's ledger deltas to workspace_totals; with
// `skipUnchanged` it skips a workspace whose deltas are all zero when its row exists (the upsert would change
// nothing but write a row version: the arrays-only UPDATE above, a rename), and still creates a missing row.
const customerLedgerTotals = (skipUnchanged: boolean) => `
    CREATE OR REPLACE FUNCTION customer_ledger_totals() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO workspace_totals AS t (workspace_id, billed, invoice_collected, outstanding, open_invoices, customers)
        SELECT c.workspace_id, sum(sign * billed), sum(sign * collected), sum(sign * outstanding), sum(sign * open_invoices),
               sum(sign * (invoices > 0)::int)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY c.workspace_id${
          skipUnchanged
            ? `
        HAVING sum(sign * billed) <> 0 OR sum(sign * collected) <> 0 OR sum(sign * outstanding) <> 0
            OR sum(sign * open_invoices) <> 0 OR sum(sign * (invoices > 0)::int) <> 0
            OR NOT EXISTS (SELECT 1 FROM workspace_totals x WHERE x.workspace_id = c.workspace_id)`
            : ''
        }
        ON CONFLICT (workspace_id) DO UPDATE SET
          billed = t.billed + excluded.billed,
          invoice_collected = t.invoice_collected + excluded.invoice_collected,
          outstanding = t.outstanding + excluded.outstanding,
          open_invoices = t.open_invoices + excluded.open_invoices,
          customers = t.customers + excluded.customers
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE customer_ledger ADD COLUMN open_due_dates date[] NOT NULL DEFAULT '{}',
                                ADD COLUMN owed_from bigint[] NOT NULL DEFAULT '{0}';

    CREATE FUNCTION customer_open_dues(customer uuid, OUT open_due_dates date[], OUT owed_from bigint[]) LANGUAGE sql STABLE AS $$
      SELECT coalesce(array_agg(d.due_date ORDER BY d.due_date), '{}'), coalesce(array_agg(d.owed ORDER BY d.due_date), '{}') || 0::bigint
      FROM (SELECT i.due_date, (sum(sum(i.balance)) OVER (ORDER BY i.due_date DESC))::bigint AS owed
            FROM invoices i WHERE i.customer_id = customer AND i.balance > 0 GROUP BY i.due_date) d
    $$;

    ${customerLedgerTotals(true)}
    -- (after the above, so that it writes no workspace_totals row) the customers without an open invoice keep the
    -- columns' defaults, which are exact for them
    UPDATE customer_ledger l SET (open_due_dates, owed_from) = (SELECT d.open_due_dates, d.owed_from FROM customer_open_dues(l.customer_id) d)
    WHERE EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = l.customer_id AND i.balance > 0);

    CREATE FUNCTION invoices_open_dues() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      touched uuid[];
    BEGIN
      EXECUTE format('SELECT array_agg(DISTINCT customer_id) FROM (%s) c', rollup_changes(TG_OP)) INTO touched;
      IF touched IS NULL THEN RETURN NULL; END IF;
      -- held already by the rollup's upsert today (see above): kept for a rollup that skips all-zero deltas
      PERFORM 1 FROM customer_ledger WHERE customer_id = ANY (touched) ORDER BY customer_id FOR NO KEY UPDATE;
      ${REFRESH_OPEN_DUES('unnest(touched) AS c(id)')};
      RETURN NULL;
    END $fn$;
    ${EVENTS.map(
      (event) => `
    CREATE TRIGGER invoices_rollup_${event}_open_dues AFTER ${event.toUpperCase()} ON invoices ${TRANSITION[event]}
      FOR EACH STATEMENT EXECUTE FUNCTION invoices_open_dues();`,
    ).join('')}

    ALTER FUNCTION rollups_rebuild(uuid) RENAME TO rollups_rebuild_but_open_dues;
    CREATE FUNCTION rollups_rebuild(ws uuid) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM rollups_rebuild_but_open_dues(ws);
      ${REFRESH_OPEN_DUES('(SELECT customer_id AS id FROM customer_ledger WHERE workspace_id = ws) c')};
    END $fn$;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${customerLedgerTotals(false)}
    DROP FUNCTION rollups_rebuild(uuid);
    ALTER FUNCTION rollups_rebuild_but_open_dues(uuid) RENAME TO rollups_rebuild;
    ${EVENTS.map((event) => `DROP TRIGGER invoices_rollup_${event}_open_dues ON invoices;`).join(' ')}
    DROP FUNCTION invoices_open_dues();
    DROP FUNCTION customer_open_dues(uuid);
    ALTER TABLE customer_ledger DROP COLUMN open_due_dates, DROP COLUMN owed_from;`);
}
