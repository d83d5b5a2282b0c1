import type { Knex } from 'knex';

// Derived events follow the data at once, and history stays quiet (issue 32, point 6).
//   - A statement that records entity changes (the change-recording triggers of bookings, payments, invoices, fines
//     and extensions) announces each workspace it recorded changes for on the channel frs_entity_changes, with the
//     workspace's id as the payload; the notification is sent when the transaction commits (never for one rolled
//     back), and a transaction sends one per workspace however many statements it ran. The worker listening there
//     turns that workspace's changes into events at once instead of at the next minute's calendar sweep.
//   - The transaction-local setting frs.history = 'on' (SELECT set_config('frs.history', 'on', true)) says the rows
//     written in the transaction are history (a backfill, an import job): no entity change is recorded for them, so
//     they raise no derived event. One row trigger before the insert into entity_changes decides it for every
//     recorder, evaluated in its WHEN clause (no function call while the switch is off).
// The channel's name is written here as it is (a migration imports nothing from src/).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION entity_changes_history_skip() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER entity_changes_history BEFORE INSERT ON entity_changes
      FOR EACH ROW WHEN (current_setting('frs.history', true) = 'on') EXECUTE FUNCTION entity_changes_history_skip();

    CREATE FUNCTION entity_changes_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM pg_notify('frs_entity_changes', w.workspace_id::text) FROM (SELECT DISTINCT workspace_id FROM new_rows) w;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER entity_changes_notify AFTER INSERT ON entity_changes REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION entity_changes_notify();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER entity_changes_notify ON entity_changes; DROP FUNCTION entity_changes_notify();
    DROP TRIGGER entity_changes_history ON entity_changes; DROP FUNCTION entity_changes_history_skip();`);
}
