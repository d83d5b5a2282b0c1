import type { Knex } from 'knex';

// bookings_vehicles_out (20261123002200) runs on every statement on bookings, also the many that move no booking
// into or out of status active (a payment updating its booking's collected, an invoice its balance_due, a rename its
// customer's copies): each planned and ran a dynamic statement that found nothing to do (measured: the largest
// share of a direct writer's time after the invoice update, bench/ingest/direct-writers.ts). It now returns at once
// when neither the statement's new nor its old rows hold an active booking (static look-ups of the transition
// tables: only rows in status active move a count, so the result is the same).
const body = (skip: boolean) => `
    CREATE OR REPLACE FUNCTION bookings_vehicles_out() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      hit boolean := false;
    BEGIN${
      skip
        ? `
      IF TG_OP <> 'DELETE' THEN hit := EXISTS (SELECT 1 FROM new_rows WHERE status = 'active'); END IF;
      IF NOT hit AND TG_OP <> 'INSERT' THEN hit := EXISTS (SELECT 1 FROM old_rows WHERE status = 'active'); END IF;
      IF NOT hit THEN RETURN NULL; END IF;`
        : ''
    }
      -- only rows entering or leaving status active move a count; a vehicle whose count is unchanged is not written
      EXECUTE format($q$
        WITH c AS (%s)
        UPDATE vehicles v SET active_bookings = v.active_bookings + d.delta
        FROM (SELECT vehicle_id, sum(sign) AS delta FROM c WHERE status = 'active' GROUP BY vehicle_id) d
        WHERE v.id = d.vehicle_id AND d.delta <> 0
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(body(true));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(body(false));
}
