import type { Knex } from 'knex';

// The event feed (GET /v1/events, src/webhooks/event-feed.ts) reads a workspace's events in the order their
// transactions were given ids, and only those recorded by transactions older than every transaction still running:
// a feed ordered by time alone would skip an event whose transaction began before a later one's and committed after a
// consumer had read past it. `recorded_xid` is the recording transaction's id (existing rows: 0, first, in their time
// order); the constant default fills them without rewriting the table, then new rows take their own.
//
// Each statement that records events of the public catalogue announces their workspaces on the channel frs_events
// (the workspace id alone, no event data), so that a request waiting on the feed (long polling) re-reads at once; the
// announcement is sent on commit. webhook.test (the test operation's) is never announced: the feed leaves it out.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE events ADD COLUMN recorded_xid xid8 NOT NULL DEFAULT '0';
    ALTER TABLE events ALTER COLUMN recorded_xid SET DEFAULT pg_current_xact_id();
    CREATE INDEX events_feed ON events (workspace_id, recorded_xid, created_at, id);

    CREATE FUNCTION frs_announce_events() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM pg_notify('frs_events', w.workspace_id::text)
      FROM (SELECT DISTINCT workspace_id FROM recorded WHERE event <> 'webhook.test') w;
      RETURN NULL;
    END $$;
    CREATE TRIGGER events_announce AFTER INSERT ON events REFERENCING NEW TABLE AS recorded
      FOR EACH STATEMENT EXECUTE FUNCTION frs_announce_events();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER events_announce ON events;
    DROP FUNCTION frs_announce_events();
    DROP INDEX events_feed;
    ALTER TABLE events DROP COLUMN recorded_xid;`);
}
