import type { Knex } from 'knex';

// The fleet summary splits active vehicles into rented and available from the cars out now: these two partial
// indexes let it read them from indexes alone (the vehicle of each active booking; whether that vehicle is active).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX bookings_active_vehicle ON bookings (workspace_id, vehicle_id) WHERE status = 'active';
    CREATE INDEX vehicles_active ON vehicles (workspace_id, id) WHERE state = 'active';`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX bookings_active_vehicle; DROP INDEX vehicles_active;`);
}
