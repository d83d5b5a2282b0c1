import type { Knex } from 'knex';

// The API's role may insert into events and deliveries, for the test operation alone. Grants cannot say "only
// webhook.test", so these statement-level triggers do: a user who may not update deliveries (the API's role, or a
// login that is only a member of it) may insert only `webhook.test` events, and deliveries whose event and body are
// `webhook.test`. Otherwise SQL run on the API's connection could queue, say, a payment.captured to any endpoint, and
// the worker would sign it with the endpoint's real secret. The worker and the owner (who may update deliveries) pass
// at the cost of one privilege check per statement.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION frs_queue_only_test_events() RETURNS trigger LANGUAGE plpgsql AS $$
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
    CREATE TRIGGER events_queue_only_test_events AFTER INSERT ON events
      REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION frs_queue_only_test_events();
    CREATE TRIGGER deliveries_queue_only_test_events AFTER INSERT ON deliveries
      REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION frs_queue_only_test_events();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER deliveries_queue_only_test_events ON deliveries;
    DROP TRIGGER events_queue_only_test_events ON events;
    DROP FUNCTION frs_queue_only_test_events();`);
}
