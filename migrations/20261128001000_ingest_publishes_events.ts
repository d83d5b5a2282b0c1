import type { Knex } from 'knex';

// The admin API's batch writes run as a role of their own (`<database>_ingest`, src/db/roles.ts), which publishes the
// batch's events (writeRecords' `events`) and may not update deliveries. The statement-level triggers of migration
// 20261123001000 let only a user who may update deliveries queue an event other than webhook.test: this lets a user who
// may write the platform's record versions (record_versions: the ingest role, the owner) queue them too. The API's
// role may do neither, and stays held to webhook.test. Search path pg_catalog and pg_temp, every table qualified.
export async function up(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  // (a literal of the qualified names, for has_table_privilege)
  const name = (table: string) => `'${`${S}.${table}`.replaceAll("'", "''")}'`;
  await knex.raw(`
    CREATE OR REPLACE FUNCTION frs_queue_only_test_events() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF has_table_privilege(current_user, ${name('deliveries')}, 'UPDATE') OR has_table_privilege(current_user, ${name('record_versions')}, 'INSERT') THEN
        RETURN NULL;
      END IF;
      IF TG_TABLE_NAME = 'events' THEN
        IF EXISTS (SELECT 1 FROM inserted WHERE event <> 'webhook.test') THEN
          RAISE EXCEPTION 'permission denied: this role may queue only webhook.test events' USING ERRCODE = 'insufficient_privilege';
        END IF;
      ELSIF EXISTS (SELECT 1 FROM inserted WHERE event <> 'webhook.test' OR (body::jsonb ->> 'event') IS DISTINCT FROM 'webhook.test') THEN
        RAISE EXCEPTION 'permission denied: this role may queue only webhook.test deliveries' USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN NULL;
    END $$;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION frs_queue_only_test_events() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF has_table_privilege(current_user, 'deliveries', 'UPDATE') THEN
        RETURN NULL;
      END IF;
      IF TG_TABLE_NAME = 'events' THEN
        IF EXISTS (SELECT 1 FROM inserted WHERE event <> 'webhook.test') THEN
          RAISE EXCEPTION 'permission denied: this role may queue only webhook.test events' USING ERRCODE = 'insufficient_privilege';
        END IF;
      ELSIF EXISTS (SELECT 1 FROM inserted WHERE event <> 'webhook.test' OR (body::jsonb ->> 'event') IS DISTINCT FROM 'webhook.test') THEN
        RAISE EXCEPTION 'permission denied: this role may queue only webhook.test deliveries' USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN NULL;
    END $$;
    ALTER FUNCTION frs_queue_only_test_events() RESET search_path;`);
}
