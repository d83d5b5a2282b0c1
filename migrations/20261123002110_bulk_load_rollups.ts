import type { Knex } from 'knex';

// A bulk load into a workspace (seed large, import into an empty workspace: src/db/bulk-load.ts) computes that
// workspace's running totals once, set-based, at the end of its transaction, instead of through the statement
// triggers chunk by chunk: the payment chunks updating invoices.paid and bookings.collected (whose updates cascade
// into the invoice and booking rollups) grew superlinearly with the row versions piling up in one transaction.
//
// rollup_changes() (the transition-table rows every rollup trigger applies) leaves out the rows of the workspace
// named by the transaction-local setting frs.bulk_load_workspace; every other workspace, and every other
// transaction, keeps the triggers as they were. Only the schema owner writes these tables (the API and worker roles
// have no INSERT, UPDATE or DELETE on them, src/db/roles.ts), and the owner could disable the triggers anyway.
// rollups_rebuild(ws) sets every running total of `ws` to a fresh computation from the base tables.
//
// A new rollup (a trigger function calling rollup_changes) must be rebuilt here as well: test/rollups.test.ts
// lists the trigger functions that call rollup_changes and fails on one this function does not know. The function
// also rebuilds the rollups of later migrations (payment_months, vehicle_models, vehicles.active_bookings and
// vehicle_state_counts.rented, customer_ledger.name); PL/pgSQL resolves the tables when it runs.

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION rollup_changes(op text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE op
        WHEN 'INSERT' THEN 'SELECT n.*, 1 AS sign FROM new_rows n WHERE ' || replace(f.skip, '%', 'n')
        WHEN 'DELETE' THEN 'SELECT o.*, -1 AS sign FROM old_rows o WHERE ' || replace(f.skip, '%', 'o')
        ELSE 'SELECT n.*, 1 AS sign FROM new_rows n WHERE ' || replace(f.skip, '%', 'n')
          || ' UNION ALL SELECT o.*, -1 AS sign FROM old_rows o WHERE ' || replace(f.skip, '%', 'o')
      END
      FROM (SELECT $f$%.workspace_id IS DISTINCT FROM nullif(current_setting('frs.bulk_load_workspace', true), '')::uuid$f$ AS skip) f
    $$;

    CREATE FUNCTION rollups_rebuild(ws uuid) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
      -- derived columns first, in the order they depend on each other: payments -> invoices.paid and
      -- bookings.collected; invoices (their balance) -> bookings.balance_due. Rows already right are not rewritten.
      UPDATE invoices i SET paid = s.paid
      FROM (SELECT x.id, coalesce(sum(p.net), 0) AS paid FROM invoices x LEFT JOIN payments p ON p.invoice_id = x.id
            WHERE x.workspace_id = ws GROUP BY x.id) s
      WHERE i.id = s.id AND i.paid <> s.paid;
      UPDATE bookings b SET collected = s.collected, balance_due = s.balance_due
      FROM (SELECT x.id, coalesce(p.collected, 0) AS collected, coalesce(i.balance, 0) AS balance_due
            FROM bookings x
            LEFT JOIN (SELECT booking_id, sum(net) AS collected FROM payments WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) p
              ON p.booking_id = x.id
            LEFT JOIN (SELECT booking_id, sum(balance) AS balance FROM invoices WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) i
              ON i.booking_id = x.id
            WHERE x.workspace_id = ws) s
      WHERE b.id = s.id AND (b.collected <> s.collected OR b.balance_due <> s.balance_due);

      DELETE FROM payment_slots WHERE workspace_id = ws;
      INSERT INTO payment_slots (workspace_id, slot, collected, booking_collected, deposits)
      SELECT ws, date_bin('15 minutes', at, timestamptz '2000-01-01T00:00:00Z'), sum(net),
             coalesce(sum(net) FILTER (WHERE booking_id IS NOT NULL), 0), sum(deposit_net)
      FROM payments WHERE workspace_id = ws GROUP BY 2;

      DELETE FROM payment_days WHERE workspace_id = ws;
      INSERT INTO payment_days (workspace_id, day, collected)
      SELECT ws, (slot AT TIME ZONE 'UTC')::date, sum(collected) FROM payment_slots WHERE workspace_id = ws GROUP BY 2;

      DELETE FROM payment_months WHERE workspace_id = ws;
      INSERT INTO payment_months (workspace_id, month, collected)
      SELECT ws, date_trunc('month', s.slot AT TIME ZONE w.timezone)::date, sum(s.collected)
      FROM payment_slots s JOIN workspaces w ON w.id = s.workspace_id WHERE s.workspace_id = ws GROUP BY 2;

      DELETE FROM customer_ledger WHERE workspace_id = ws;
      INSERT INTO customer_ledger (customer_id, workspace_id, name, billed, collected, outstanding, open_invoices, invoices)
      SELECT i.customer_id, ws, min(c.name), coalesce(sum(i.total) FILTER (WHERE i.status = 'issued'), 0),
             coalesce(sum(i.paid) FILTER (WHERE i.status = 'issued'), 0), sum(i.balance), count(*) FILTER (WHERE i.balance > 0),
             count(*) FILTER (WHERE i.status = 'issued')
      FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.workspace_id = ws GROUP BY i.customer_id;

      DELETE FROM vehicle_revenue WHERE workspace_id = ws;
      INSERT INTO vehicle_revenue (vehicle_id, workspace_id, revenue, bookings)
      SELECT vehicle_id, ws, sum(collected), count(*) FILTER (WHERE status <> 'canceled')
      FROM bookings WHERE workspace_id = ws GROUP BY vehicle_id;

      DELETE FROM booking_status_counts WHERE workspace_id = ws;
      INSERT INTO booking_status_counts (workspace_id, status, count)
      SELECT ws, status, count(*) FROM bookings WHERE workspace_id = ws GROUP BY status;

      UPDATE vehicles v SET active_bookings = s.n
      FROM (SELECT x.id, count(b.id) AS n FROM vehicles x LEFT JOIN bookings b ON b.vehicle_id = x.id AND b.status = 'active'
            WHERE x.workspace_id = ws GROUP BY x.id) s
      WHERE v.id = s.id AND v.active_bookings <> s.n;

      DELETE FROM vehicle_state_counts WHERE workspace_id = ws;
      INSERT INTO vehicle_state_counts (workspace_id, state, count, rented)
      SELECT ws, state, count(*), count(*) FILTER (WHERE active_bookings > 0) FROM vehicles WHERE workspace_id = ws GROUP BY state;

      DELETE FROM vehicle_models WHERE workspace_id = ws;
      INSERT INTO vehicle_models (workspace_id, make, model, vehicles)
      SELECT ws, make, model, count(*) FROM vehicles WHERE workspace_id = ws GROUP BY make, model;

      DELETE FROM expense_months WHERE workspace_id = ws;
      INSERT INTO expense_months (workspace_id, month, amount)
      SELECT ws, date_trunc('month', date)::date, sum(amount) FROM expenses WHERE workspace_id = ws GROUP BY 2;

      DELETE FROM open_balances WHERE workspace_id = ws;
      INSERT INTO open_balances (workspace_id, due_date, balance, invoices)
      SELECT ws, due_date, sum(balance), count(*) FROM invoices WHERE workspace_id = ws AND balance > 0 GROUP BY due_date;

      INSERT INTO workspace_totals AS t (workspace_id, collected, booking_collected, deposits, expenses, billed, invoice_collected,
                                         outstanding, open_invoices, customers)
      SELECT ws, p.collected, p.booking_collected, p.deposits, e.expenses, l.billed, l.collected, l.outstanding, l.open_invoices, l.customers
      FROM (SELECT coalesce(sum(collected), 0) AS collected, coalesce(sum(booking_collected), 0) AS booking_collected,
                   coalesce(sum(deposits), 0) AS deposits FROM payment_slots WHERE workspace_id = ws) p,
           (SELECT coalesce(sum(amount), 0) AS expenses FROM expense_months WHERE workspace_id = ws) e,
           (SELECT coalesce(sum(billed), 0) AS billed, coalesce(sum(collected), 0) AS collected, coalesce(sum(outstanding), 0) AS outstanding,
                   coalesce(sum(open_invoices), 0) AS open_invoices, count(*) FILTER (WHERE invoices > 0) AS customers
            FROM customer_ledger WHERE workspace_id = ws) l
      ON CONFLICT (workspace_id) DO UPDATE SET
        collected = excluded.collected, booking_collected = excluded.booking_collected, deposits = excluded.deposits,
        expenses = excluded.expenses, billed = excluded.billed, invoice_collected = excluded.invoice_collected,
        outstanding = excluded.outstanding, open_invoices = excluded.open_invoices, customers = excluded.customers;
    END $fn$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION IF EXISTS rollups_rebuild(uuid);
    CREATE OR REPLACE FUNCTION rollup_changes(op text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE op
        WHEN 'INSERT' THEN 'SELECT n.*, 1 AS sign FROM new_rows n'
        WHEN 'DELETE' THEN 'SELECT o.*, -1 AS sign FROM old_rows o'
        ELSE 'SELECT n.*, 1 AS sign FROM new_rows n UNION ALL SELECT o.*, -1 AS sign FROM old_rows o'
      END
    $$;
  `);
}
