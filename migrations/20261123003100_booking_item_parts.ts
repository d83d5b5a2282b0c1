import type { Knex } from 'knex';

// Today's operations read each item from the booking row they already read, with no look-up of a customer or a car
// per item (two index probes per item, about half of the statement's database CPU on a busy day) and little to build:
//   bookings.customer_json  {"id":…,"name":…} of the booking's customer, as the answer carries it (customer_ref_json)
//   bookings.vehicle_json   {"id":…,"plate":…} of the booking's car (vehicle_ref_json)
//   bookings.pickup_iso, dropoff_iso  the times as Date.prototype.toISOString() writes them (iso_utc_text), stored
//                           generated columns: to_char cost about 0.6 µs an item per request
// The names and plates are escaped by to_json, as JSON.stringify escapes them. The two objects are kept by triggers:
//   - on bookings, a row trigger run before the row is written, for rows inserted, or updated to another customer or
//     car (or with a copy itself written): taken afresh from customers and vehicles into the row itself, so the
//     booking is written once and bookings' statement triggers run once. The rows of a workspace being bulk-loaded
//     are left to rollups_rebuild, as every running total is.
//   - on customers and vehicles, statement triggers writing a new name or plate to their bookings, each only its own
//     column (so a rename and a new plate at the same time do not overwrite each other's copy).
// The lock rule of 20261123002330: a booking's foreign keys take only FOR KEY SHARE on its customer and car, which a
// rename does not wait for; the bookings trigger reads them FOR SHARE, which waits for a rename not yet committed and
// then reads its name, and a rename that comes later waits for the booking's transaction and then finds the booking.
// The day's range is read from bookings_pickup and bookings_dropoff, which now hold the booking's id after the time:
// the items come in their order (time, then id) with no sort.
// Backfilled here, with customers and vehicles locked against renames until the triggers are in place; the stored
// columns are added last, so their rewrite of the table also drops the row versions the backfill left behind (the two
// indexes are dropped before it and built after it, once). It holds bookings under an exclusive lock throughout:
// about a minute on the large bench set (1M bookings), nearly all of it the backfill's update (README: downtime).
// A rename or a new plate now writes bookings, so it can deadlock with a writer of that customer's or car's bookings
// that then touches the customer or car; one of the two is rolled back whole (README).

/** rollups_rebuild(ws) of 20261123002110, whose bookings statement now also sets the copies (restored by down()). */
const rollupsRebuild = (copies: boolean) => `
    CREATE OR REPLACE FUNCTION rollups_rebuild(ws uuid) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
      -- derived columns first, in the order they depend on each other: payments -> invoices.paid and
      -- bookings.collected; invoices (their balance) -> bookings.balance_due. Rows already right are not rewritten.
      UPDATE invoices i SET paid = s.paid
      FROM (SELECT x.id, coalesce(sum(p.net), 0) AS paid FROM invoices x LEFT JOIN payments p ON p.invoice_id = x.id
            WHERE x.workspace_id = ws GROUP BY x.id) s
      WHERE i.id = s.id AND i.paid <> s.paid;
${
  copies
    ? `      -- with the copies of the customer and the car (20261123003100)
      UPDATE bookings b SET collected = s.collected, balance_due = s.balance_due, customer_json = s.customer_json, vehicle_json = s.vehicle_json
      FROM (SELECT x.id, coalesce(p.collected, 0) AS collected, coalesce(i.balance, 0) AS balance_due,
                   customer_ref_json(c.id, c.name) AS customer_json, vehicle_ref_json(v.id, v.plate) AS vehicle_json
            FROM bookings x
            JOIN customers c ON c.id = x.customer_id
            JOIN vehicles v ON v.id = x.vehicle_id
            LEFT JOIN (SELECT booking_id, sum(net) AS collected FROM payments WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) p
              ON p.booking_id = x.id
            LEFT JOIN (SELECT booking_id, sum(balance) AS balance FROM invoices WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) i
              ON i.booking_id = x.id
            WHERE x.workspace_id = ws) s
      WHERE b.id = s.id AND (b.collected <> s.collected OR b.balance_due <> s.balance_due
                             OR b.customer_json IS DISTINCT FROM s.customer_json OR b.vehicle_json IS DISTINCT FROM s.vehicle_json);`
    : `      UPDATE bookings b SET collected = s.collected, balance_due = s.balance_due
      FROM (SELECT x.id, coalesce(p.collected, 0) AS collected, coalesce(i.balance, 0) AS balance_due
            FROM bookings x
            LEFT JOIN (SELECT booking_id, sum(net) AS collected FROM payments WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) p
              ON p.booking_id = x.id
            LEFT JOIN (SELECT booking_id, sum(balance) AS balance FROM invoices WHERE workspace_id = ws AND booking_id IS NOT NULL GROUP BY 1) i
              ON i.booking_id = x.id
            WHERE x.workspace_id = ws) s
      WHERE b.id = s.id AND (b.collected <> s.collected OR b.balance_due <> s.balance_due);`
}

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
    END $fn$;`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    LOCK TABLE customers, vehicles IN SHARE MODE;

    CREATE FUNCTION customer_ref_json(id uuid, name text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN '{"id":"' || id::text || '","name":' || to_json(name)::text || '}';
    CREATE FUNCTION vehicle_ref_json(id uuid, plate text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN '{"id":"' || id::text || '","plate":' || to_json(plate)::text || '}';
    -- Date.prototype.toISOString()'s text, the one place the database writes it (the webhook payloads use it too);
    -- the format has no locale- or zone-dependent field, so the text depends on the instant alone
    CREATE FUNCTION iso_utc_text(t timestamptz) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

    ALTER TABLE bookings ADD COLUMN customer_json text, ADD COLUMN vehicle_json text;
    -- Only the new columns change: the rollup and change-recording triggers of bookings have nothing to do.
    ALTER TABLE bookings DISABLE TRIGGER USER;
    UPDATE bookings b SET customer_json = customer_ref_json(c.id, c.name), vehicle_json = vehicle_ref_json(v.id, v.plate)
    FROM customers c, vehicles v WHERE c.id = b.customer_id AND v.id = b.vehicle_id;
    ALTER TABLE bookings ENABLE TRIGGER USER;
    DROP INDEX bookings_pickup, bookings_dropoff;
    ALTER TABLE bookings ADD COLUMN pickup_iso text GENERATED ALWAYS AS (iso_utc_text(pickup_at)) STORED,
                         ADD COLUMN dropoff_iso text GENERATED ALWAYS AS (iso_utc_text(dropoff_at)) STORED;
    CREATE INDEX bookings_pickup ON bookings (workspace_id, pickup_at, id);
    CREATE INDEX bookings_dropoff ON bookings (workspace_id, dropoff_at, id);

    CREATE FUNCTION bookings_copy_refs() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      -- Only a customer or car new to the row (or a copy written by hand) is locked and read: a booking moved to
      -- another car while its customer is renamed does not wait for the rename, which may itself be waiting for the
      -- booking (the rename then writes the name). FOR SHARE waits for a rename not yet committed and returns the
      -- row as it committed.
      IF TG_OP = 'INSERT' THEN
        SELECT customer_ref_json(x.id, x.name) INTO NEW.customer_json FROM customers x WHERE x.id = NEW.customer_id FOR SHARE;
        SELECT vehicle_ref_json(v.id, v.plate) INTO NEW.vehicle_json FROM vehicles v WHERE v.id = NEW.vehicle_id FOR SHARE;
        RETURN NEW;
      END IF;
      IF NEW.customer_id IS DISTINCT FROM OLD.customer_id OR NEW.customer_json IS DISTINCT FROM OLD.customer_json THEN
        SELECT customer_ref_json(x.id, x.name) INTO NEW.customer_json FROM customers x WHERE x.id = NEW.customer_id FOR SHARE;
      END IF;
      IF NEW.vehicle_id IS DISTINCT FROM OLD.vehicle_id OR NEW.vehicle_json IS DISTINCT FROM OLD.vehicle_json THEN
        SELECT vehicle_ref_json(v.id, v.plate) INTO NEW.vehicle_json FROM vehicles v WHERE v.id = NEW.vehicle_id FOR SHARE;
      END IF;
      RETURN NEW;
    END $fn$;
    -- A row trigger setting the row before it is written: no second write of the booking, so none of bookings' other
    -- triggers run again. It fires only for inserts and for updates naming a customer, a car or a copy. The rows of a
    -- workspace being bulk-loaded (src/db/bulk-load.ts) are left to rollups_rebuild, as every running total is.
    CREATE TRIGGER bookings_copy_refs BEFORE INSERT OR UPDATE OF customer_id, vehicle_id, customer_json, vehicle_json ON bookings
      FOR EACH ROW WHEN (NEW.workspace_id IS DISTINCT FROM nullif(current_setting('frs.bulk_load_workspace', true), '')::uuid)
      EXECUTE FUNCTION bookings_copy_refs();

    CREATE FUNCTION customers_booking_refs() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      renamed uuid[];
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM new_rows) THEN RETURN NULL; END IF;
      EXECUTE 'SELECT array_agg(n.id) FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE o.name IS DISTINCT FROM n.name' INTO renamed;
      IF renamed IS NULL THEN RETURN NULL; END IF;
      UPDATE bookings b SET customer_json = customer_ref_json(x.id, x.name) FROM customers x
      WHERE b.customer_id = ANY (renamed) AND x.id = b.customer_id AND b.customer_json IS DISTINCT FROM customer_ref_json(x.id, x.name);
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER customers_booking_refs AFTER UPDATE ON customers REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION customers_booking_refs();

    CREATE FUNCTION vehicles_booking_refs() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      replated uuid[];
    BEGIN
      -- (bookings' triggers update vehicles on every bookings statement, mostly no row or not the plate)
      IF NOT EXISTS (SELECT 1 FROM new_rows) THEN RETURN NULL; END IF;
      EXECUTE 'SELECT array_agg(n.id) FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE o.plate IS DISTINCT FROM n.plate' INTO replated;
      IF replated IS NULL THEN RETURN NULL; END IF;
      UPDATE bookings b SET vehicle_json = vehicle_ref_json(v.id, v.plate) FROM vehicles v
      WHERE b.vehicle_id = ANY (replated) AND v.id = b.vehicle_id AND b.vehicle_json IS DISTINCT FROM vehicle_ref_json(v.id, v.plate);
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER vehicles_booking_refs AFTER UPDATE ON vehicles REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION vehicles_booking_refs();
    ${rollupsRebuild(true)}`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${rollupsRebuild(false)}
    DROP TRIGGER vehicles_booking_refs ON vehicles; DROP FUNCTION vehicles_booking_refs();
    DROP TRIGGER customers_booking_refs ON customers; DROP FUNCTION customers_booking_refs();
    DROP TRIGGER bookings_copy_refs ON bookings;
    DROP FUNCTION bookings_copy_refs();
    ALTER TABLE bookings DROP COLUMN customer_json, DROP COLUMN vehicle_json, DROP COLUMN pickup_iso, DROP COLUMN dropoff_iso;
    DROP INDEX bookings_pickup, bookings_dropoff;
    CREATE INDEX bookings_pickup ON bookings (workspace_id, pickup_at);
    CREATE INDEX bookings_dropoff ON bookings (workspace_id, dropoff_at);
    DROP FUNCTION customer_ref_json(uuid, text), vehicle_ref_json(uuid, text), iso_utc_text(timestamptz);`);
}
