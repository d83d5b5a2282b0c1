import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

// The cars out now as running totals, so the fleet summary reads four rows whatever the size of the fleet:
//   vehicles.active_bookings     the vehicle's bookings in status active, kept by a statement trigger on bookings
//                                (signed transition-table deltas, as every rollup)
//   vehicle_state_counts.rented  per workspace and stored state, the vehicles with at least one active booking,
//                                kept by the vehicles trigger (the update above fires it too)
// A vehicle is rented when its state is active and it has an active booking, so `rented` of the `active` row is the
// fleet summary's figure. The booking summary's clock-bound counts read the active bookings by dropoff time
// (bookings_active_dropoff) over the range they count, instead of every active booking. The two indexes the fleet
// summary used to find the cars out now are no longer read.
// Existing data is backfilled: the update of active_bookings goes through the new vehicles trigger, which adds
// exactly those vehicles to `rented`.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE vehicles ADD COLUMN active_bookings integer NOT NULL DEFAULT 0;
    ALTER TABLE vehicle_state_counts ADD COLUMN rented bigint NOT NULL DEFAULT 0;

    CREATE OR REPLACE FUNCTION vehicles_state_counts() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO vehicle_state_counts AS s (workspace_id, state, count, rented)
        SELECT c.workspace_id, c.state, sum(sign), sum(sign * (c.active_bookings > 0)::int)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, state) DO UPDATE SET count = s.count + excluded.count, rented = s.rented + excluded.rented
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION bookings_vehicles_out() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      -- only rows entering or leaving status active move a count; a vehicle whose count is unchanged is not written
      EXECUTE format($q$
        WITH c AS (%s)
        UPDATE vehicles v SET active_bookings = v.active_bookings + d.delta
        FROM (SELECT vehicle_id, sum(sign) AS delta FROM c WHERE status = 'active' GROUP BY vehicle_id) d
        WHERE v.id = d.vehicle_id AND d.delta <> 0
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    UPDATE vehicles v SET active_bookings = a.n
    FROM (SELECT vehicle_id, count(*) AS n FROM bookings WHERE status = 'active' GROUP BY vehicle_id) a
    WHERE v.id = a.vehicle_id;

    CREATE INDEX bookings_active_dropoff ON bookings (workspace_id, dropoff_at) WHERE status = 'active';
    DROP INDEX bookings_active_vehicle;
    DROP INDEX vehicles_active;`);
  await knex.raw(createRollupTriggers('bookings', 'bookings_vehicles_out'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(dropRollupTriggers('bookings', 'bookings_vehicles_out'));
  await knex.raw(`
    CREATE INDEX bookings_active_vehicle ON bookings (workspace_id, vehicle_id) WHERE status = 'active';
    CREATE INDEX vehicles_active ON vehicles (workspace_id, id) WHERE state = 'active';
    DROP INDEX bookings_active_dropoff;
    DROP FUNCTION bookings_vehicles_out();
    CREATE OR REPLACE FUNCTION vehicles_state_counts() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO vehicle_state_counts AS s (workspace_id, state, count)
        SELECT c.workspace_id, c.state, sum(sign)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, state) DO UPDATE SET count = s.count + excluded.count
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;
    ALTER TABLE vehicle_state_counts DROP COLUMN rented;
    ALTER TABLE vehicles DROP COLUMN active_bookings;`);
}
