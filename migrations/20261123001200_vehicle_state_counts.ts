import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

// Vehicles per workspace and stored state, kept like the other running totals (statement-level triggers applying
// signed transition-table deltas), so the fleet summary no longer counts every vehicle of the workspace: only the
// cars out now (active bookings) are read to split active vehicles into rented and available.
// Existing data is backfilled.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE vehicle_state_counts (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      state text NOT NULL,
      count bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, state)
    );

    CREATE FUNCTION vehicles_state_counts() RETURNS trigger LANGUAGE plpgsql AS $fn$
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

    INSERT INTO vehicle_state_counts (workspace_id, state, count)
    SELECT workspace_id, state, count(*) FROM vehicles GROUP BY 1, 2;`);
  await knex.raw(createRollupTriggers('vehicles', 'vehicles_state_counts'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(dropRollupTriggers('vehicles', 'vehicles_state_counts'));
  await knex.raw(`DROP FUNCTION vehicles_state_counts(); DROP TABLE vehicle_state_counts;`);
}
