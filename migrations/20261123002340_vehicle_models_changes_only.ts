import type { Knex } from 'knex';

// vehicle_models is written only for the makes and models whose count changes. Every booking entering or leaving
// `active` updates its vehicle (vehicles.active_bookings), and the vehicles trigger then upserted the car's model
// with a delta of 0: a needless write, and a lock on that row which other writers of the model then waited for.
const upsert = (having: string) => `
    CREATE OR REPLACE FUNCTION vehicles_models() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO vehicle_models AS m (workspace_id, make, model, vehicles)
        SELECT c.workspace_id, c.make, c.model, sum(sign)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2, 3${having}
        ON CONFLICT (workspace_id, make, model) DO UPDATE SET vehicles = m.vehicles + excluded.vehicles
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(upsert(' HAVING sum(sign) <> 0'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(upsert(''));
}
