import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

const TRIGGERS = [
  ['payments', 'payments_totals'],
  ['expenses', 'expenses_totals'],
  ['invoices', 'invoices_open_balances'],
  ['customer_ledger', 'customer_ledger_totals'],
] as const;

// More running totals, kept the same way as those of 20261122000200_rollups (statement-level triggers applying
// the signed transition-table deltas), so that no summary reads more than a few hundred rows:
//   workspace_totals   per workspace: collected, collected on bookings, deposits held, expenses, and the
//                      receivables book (billed, collected on invoices, outstanding, open invoices, customers)
//   open_balances      per workspace and due date: the open invoice balance (ageing is a sum over due dates)
//   bookings.balance_due  the open balance of the booking's invoices (today's operations)
// Existing data is backfilled.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE workspace_totals (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
      collected bigint NOT NULL DEFAULT 0,
      booking_collected bigint NOT NULL DEFAULT 0,
      deposits bigint NOT NULL DEFAULT 0,
      expenses bigint NOT NULL DEFAULT 0,
      billed bigint NOT NULL DEFAULT 0,
      invoice_collected bigint NOT NULL DEFAULT 0,
      outstanding bigint NOT NULL DEFAULT 0,
      open_invoices bigint NOT NULL DEFAULT 0,
      customers bigint NOT NULL DEFAULT 0
    );

    CREATE TABLE open_balances (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      due_date date NOT NULL,
      balance bigint NOT NULL DEFAULT 0,
      invoices bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, due_date)
    );

    ALTER TABLE bookings ADD COLUMN balance_due bigint NOT NULL DEFAULT 0;

    CREATE FUNCTION payments_totals() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO workspace_totals AS t (workspace_id, collected, booking_collected, deposits)
        SELECT c.workspace_id, sum(sign * net), coalesce(sum(sign * net) FILTER (WHERE booking_id IS NOT NULL), 0), sum(sign * deposit_net)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY c.workspace_id
        ON CONFLICT (workspace_id) DO UPDATE SET
          collected = t.collected + excluded.collected,
          booking_collected = t.booking_collected + excluded.booking_collected,
          deposits = t.deposits + excluded.deposits
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION expenses_totals() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO workspace_totals AS t (workspace_id, expenses)
        SELECT c.workspace_id, sum(sign * amount)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY c.workspace_id
        ON CONFLICT (workspace_id) DO UPDATE SET expenses = t.expenses + excluded.expenses
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION invoices_open_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s),
        d AS (
          SELECT c.workspace_id, c.due_date, sum(sign * balance) AS balance, sum(sign * (balance > 0)::int) AS invoices
          FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
          GROUP BY 1, 2
          HAVING sum(sign * balance) <> 0 OR sum(sign * (balance > 0)::int) <> 0
        )
        INSERT INTO open_balances AS o (workspace_id, due_date, balance, invoices)
        SELECT * FROM d
        ON CONFLICT (workspace_id, due_date) DO UPDATE SET balance = o.balance + excluded.balance, invoices = o.invoices + excluded.invoices
      $q$, rollup_changes(TG_OP));
      EXECUTE format($q$
        WITH c AS (%s)
        UPDATE bookings b SET balance_due = b.balance_due + d.delta
        FROM (SELECT booking_id, sum(sign * balance) AS delta FROM c WHERE booking_id IS NOT NULL GROUP BY booking_id) d
        WHERE b.id = d.booking_id AND d.delta <> 0
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION customer_ledger_totals() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO workspace_totals AS t (workspace_id, billed, invoice_collected, outstanding, open_invoices, customers)
        SELECT c.workspace_id, sum(sign * billed), sum(sign * collected), sum(sign * outstanding), sum(sign * open_invoices),
               sum(sign * (invoices > 0)::int)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY c.workspace_id
        ON CONFLICT (workspace_id) DO UPDATE SET
          billed = t.billed + excluded.billed,
          invoice_collected = t.invoice_collected + excluded.invoice_collected,
          outstanding = t.outstanding + excluded.outstanding,
          open_invoices = t.open_invoices + excluded.open_invoices,
          customers = t.customers + excluded.customers
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;
  `);
  for (const [table, fn] of TRIGGERS) await knex.raw(createRollupTriggers(table, fn));
  // Backfill what is already there.
  await knex.raw(`
    INSERT INTO workspace_totals (workspace_id) SELECT id FROM workspaces;
    UPDATE workspace_totals t SET collected = s.collected, booking_collected = s.booking_collected, deposits = s.deposits
    FROM (SELECT workspace_id, sum(collected) AS collected, sum(booking_collected) AS booking_collected, sum(deposits) AS deposits
          FROM payment_slots GROUP BY workspace_id) s
    WHERE t.workspace_id = s.workspace_id;
    UPDATE workspace_totals t SET expenses = s.expenses
    FROM (SELECT workspace_id, sum(amount) AS expenses FROM expenses GROUP BY workspace_id) s
    WHERE t.workspace_id = s.workspace_id;
    UPDATE workspace_totals t SET billed = s.billed, invoice_collected = s.collected, outstanding = s.outstanding,
                                  open_invoices = s.open_invoices, customers = s.customers
    FROM (SELECT workspace_id, sum(billed) AS billed, sum(collected) AS collected, sum(outstanding) AS outstanding,
                 sum(open_invoices) AS open_invoices, count(*) FILTER (WHERE invoices > 0) AS customers
          FROM customer_ledger GROUP BY workspace_id) s
    WHERE t.workspace_id = s.workspace_id;
    INSERT INTO open_balances (workspace_id, due_date, balance, invoices)
    SELECT workspace_id, due_date, sum(balance), count(*) FROM invoices WHERE balance > 0 GROUP BY 1, 2;
    UPDATE bookings b SET balance_due = s.balance
    FROM (SELECT booking_id, sum(balance) AS balance FROM invoices WHERE balance > 0 AND booking_id IS NOT NULL GROUP BY 1) s
    WHERE b.id = s.booking_id;
  `);
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, fn] of TRIGGERS)
    await knex.raw(`${dropRollupTriggers(table, fn)} DROP FUNCTION IF EXISTS ${fn}();`);
  await knex.raw(
    'ALTER TABLE bookings DROP COLUMN IF EXISTS balance_due; DROP TABLE IF EXISTS open_balances, workspace_totals;',
  );
}
