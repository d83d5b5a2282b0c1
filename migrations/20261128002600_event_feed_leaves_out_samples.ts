import type { Knex } from 'knex';

// The event feed (GET /v1/events) leaves out every event of source `test`: webhook.test, and the example events the
// admin API's sendExampleEvent queues (a real event's name and the document's example data, sent to one endpoint on
// purpose). They are no occurrence in the workspace, so a consumer of the feed must never read them, and a waiting
// request is not woken for them either: the announcement trigger (migration 20261128002000) now skips them too.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION frs_announce_events() RETURNS trigger LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM pg_notify('frs_events', w.workspace_id::text)
      FROM (SELECT DISTINCT workspace_id FROM recorded WHERE event <> 'webhook.test' AND source <> 'test') w;
      RETURN NULL;
    END $$;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION frs_announce_events() RETURNS trigger LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM pg_notify('frs_events', w.workspace_id::text)
      FROM (SELECT DISTINCT workspace_id FROM recorded WHERE event <> 'webhook.test') w;
      RETURN NULL;
    END $$;`);
}
