import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

const ROLLUP_TABLES = ['payments', 'invoices', 'bookings'];

// Running totals kept by statement-level triggers, so that the summary endpoints read a few rows instead of
// scanning millions of payments and invoices. Each trigger applies the exact delta of the statement's
// transition tables (new rows count +1, old rows -1), so every write path (import, the platform, psql) keeps
// them right, and a bulk insert costs one set-based statement per table.
//   invoices.paid / bookings.collected  net collected allocated to the invoice / linked to the booking
//   payment_slots                       net collected and deposits per 15-minute UTC slot (every time zone
//                                       offset is a multiple of 15 minutes, so local months are unions of slots)
//   customer_ledger                     per customer: billed, collected, outstanding, open and issued invoices
//   vehicle_revenue                     per vehicle: collected on its bookings, bookings that are not canceled
//   booking_status_counts               per workspace and status
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE payment_slots (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      slot timestamptz NOT NULL,
      collected bigint NOT NULL DEFAULT 0,
      booking_collected bigint NOT NULL DEFAULT 0,
      deposits bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, slot)
    );

    CREATE TABLE customer_ledger (
      customer_id uuid PRIMARY KEY REFERENCES customers(id) ON DELETE CASCADE,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      billed bigint NOT NULL DEFAULT 0,
      collected bigint NOT NULL DEFAULT 0,
      outstanding bigint NOT NULL DEFAULT 0,
      open_invoices integer NOT NULL DEFAULT 0,
      invoices integer NOT NULL DEFAULT 0
    );
    CREATE INDEX customer_ledger_outstanding ON customer_ledger (workspace_id, outstanding DESC) WHERE invoices > 0;

    CREATE TABLE vehicle_revenue (
      vehicle_id uuid PRIMARY KEY REFERENCES vehicles(id) ON DELETE CASCADE,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      revenue bigint NOT NULL DEFAULT 0,
      bookings integer NOT NULL DEFAULT 0
    );
    CREATE INDEX vehicle_revenue_top ON vehicle_revenue (workspace_id, revenue DESC);

    CREATE TABLE booking_status_counts (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      status text NOT NULL,
      count bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, status)
    );

    -- The rows a statement changed, signed: +1 for new rows, -1 for old ones.
    CREATE FUNCTION rollup_changes(op text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE op
        WHEN 'INSERT' THEN 'SELECT n.*, 1 AS sign FROM new_rows n'
        WHEN 'DELETE' THEN 'SELECT o.*, -1 AS sign FROM old_rows o'
        ELSE 'SELECT n.*, 1 AS sign FROM new_rows n UNION ALL SELECT o.*, -1 AS sign FROM old_rows o'
      END
    $$;

    CREATE FUNCTION payments_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        UPDATE invoices i SET paid = i.paid + d.delta
        FROM (SELECT invoice_id, sum(sign * net) AS delta FROM c WHERE invoice_id IS NOT NULL GROUP BY invoice_id) d
        WHERE i.id = d.invoice_id AND d.delta <> 0
      $q$, rollup_changes(TG_OP));
      EXECUTE format($q$
        WITH c AS (%s)
        UPDATE bookings b SET collected = b.collected + d.delta
        FROM (SELECT booking_id, sum(sign * net) AS delta FROM c WHERE booking_id IS NOT NULL GROUP BY booking_id) d
        WHERE b.id = d.booking_id AND d.delta <> 0
      $q$, rollup_changes(TG_OP));
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO payment_slots AS s (workspace_id, slot, collected, booking_collected, deposits)
        SELECT c.workspace_id, date_bin('15 minutes', c.at, timestamptz '2000-01-01T00:00:00Z'),
               sum(sign * net), coalesce(sum(sign * net) FILTER (WHERE booking_id IS NOT NULL), 0), sum(sign * deposit_net)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, slot) DO UPDATE SET
          collected = s.collected + excluded.collected,
          booking_collected = s.booking_collected + excluded.booking_collected,
          deposits = s.deposits + excluded.deposits
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION invoices_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO customer_ledger AS l (customer_id, workspace_id, billed, collected, outstanding, open_invoices, invoices)
        SELECT c.customer_id, min(c.workspace_id::text)::uuid,
               sum(sign * CASE WHEN status = 'issued' THEN total ELSE 0 END),
               sum(sign * CASE WHEN status = 'issued' THEN paid ELSE 0 END),
               sum(sign * balance),
               sum(sign * (balance > 0)::int),
               sum(sign * (status = 'issued')::int)
        FROM c WHERE EXISTS (SELECT 1 FROM customers k WHERE k.id = c.customer_id)
        GROUP BY c.customer_id
        ON CONFLICT (customer_id) DO UPDATE SET
          billed = l.billed + excluded.billed,
          collected = l.collected + excluded.collected,
          outstanding = l.outstanding + excluded.outstanding,
          open_invoices = l.open_invoices + excluded.open_invoices,
          invoices = l.invoices + excluded.invoices
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION bookings_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO vehicle_revenue AS v (vehicle_id, workspace_id, revenue, bookings)
        SELECT c.vehicle_id, min(c.workspace_id::text)::uuid, sum(sign * collected), sum(sign * (status <> 'canceled')::int)
        FROM c WHERE EXISTS (SELECT 1 FROM vehicles x WHERE x.id = c.vehicle_id)
        GROUP BY c.vehicle_id
        ON CONFLICT (vehicle_id) DO UPDATE SET
          revenue = v.revenue + excluded.revenue,
          bookings = v.bookings + excluded.bookings
      $q$, rollup_changes(TG_OP));
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO booking_status_counts AS b (workspace_id, status, count)
        SELECT c.workspace_id, c.status, sum(sign)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, status) DO UPDATE SET count = b.count + excluded.count
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;
  `);
  for (const table of ROLLUP_TABLES) await knex.raw(createRollupTriggers(table, `${table}_rollup`));
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ROLLUP_TABLES) await knex.raw(dropRollupTriggers(table, `${table}_rollup`));
  await knex.raw(`
    DROP FUNCTION IF EXISTS payments_rollup(), invoices_rollup(), bookings_rollup(), rollup_changes(text);
    DROP TABLE IF EXISTS booking_status_counts, vehicle_revenue, customer_ledger, payment_slots;
  `);
}
