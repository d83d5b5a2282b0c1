import type { Knex } from 'knex';

// The operational events' triggers (migration 20261128002400), made safe to run in every writer's transaction:
//
// 1. A delivery to a switched-off operational endpoint is inserted `held` (next_attempt_at NULL), as a workspace's is
//    (endpoint-lifecycle.ts): switching the endpoint on sends it, or fails it when older than 7 days
//    (releaseHeldDeliveries). Queued, it stayed in the claim's per-endpoint walk (fairness.ts) on every claim for as
//    long as the endpoint was off, and never expired. Whether the endpoint is on is read under FOR SHARE SKIP LOCKED,
//    which never waits (a wait here, inside the dispatcher's flush that holds workspace endpoints, could deadlock with
//    a flush holding the operational one): an endpoint read this way cannot be switched on or off before this
//    transaction ends, so the switch that follows sees (and holds or releases) the row inserted here. An endpoint a
//    switch or a flush holds at that moment is not read: its delivery is queued, which is never lost (a queued
//    delivery is sent once the endpoint is on); at worst, when that switch turned it off, one such row waits queued.
// 2. `delivery.exhausted` means a delivery's last attempt failed and no retry is left (the retries spent, or a 410
//    answer): it is raised only by an update that also records an attempt (attempts grows: the dispatcher's record
//    stage sets attempts and status in one statement, RECORD_ATTEMPTS in src/webhooks/attempt-records.ts), so it comes
//    at most as fast as attempts are made. Deliveries failed without an attempt (held or frozen longer than 7 days,
//    their endpoint deleted, a recovery path) raise nothing: one statement could fail hundreds of thousands of them,
//    each adding 1 + N rows to the writer's transaction. Sample deliveries (events of source 'test': webhook.test and
//    the example events of sendExampleEvent, src/core/webhooks/test-delivery.ts) raise nothing either.
// 3. The three functions search pg_catalog and pg_temp only and name this schema's objects in full (the rule of
//    migrations 20261123001000 and 20261128000200): no object another role made can stand in for one they use.
// Frozen SQL, imports nothing from src/.
const FUNCTIONS = [
  'platform_event_record(text, jsonb)',
  'endpoint_switch_platform_event()',
  'delivery_failed_platform_event()',
];

export async function up(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    CREATE OR REPLACE FUNCTION platform_event_record(event_name text, payload jsonb) RETURNS void LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $fn$
    DECLARE
      recorded ${S}.events%ROWTYPE;
    BEGIN
      INSERT INTO ${S}.events (workspace_id, event, data, source) VALUES (NULL, event_name, payload, 'platform')
        RETURNING * INTO recorded;
      -- the body as fan-out builds it (src/webhooks/fanout.ts, BODY_SQL); held while the endpoint is off (see above:
      -- NULL when a switch or a flush holds the endpoint, queued then)
      INSERT INTO ${S}.deliveries (id, workspace_id, event_id, endpoint_id, event, body, status, next_attempt_at)
      SELECT p.id, NULL, recorded.id, p.endpoint_id, event_name,
             json_build_object('id', p.id, 'event', event_name, 'createdAt', ${S}.iso_utc_text(recorded.created_at), 'data', recorded.data)::text,
             CASE WHEN p.switched_off THEN 'held' ELSE 'queued' END,
             CASE WHEN p.switched_off THEN NULL ELSE now() END
      FROM (SELECT gen_random_uuid() AS id, w.id AS endpoint_id,
                   coalesce((SELECT NOT l.is_active FROM ${S}.webhook_endpoints l WHERE l.id = w.id FOR SHARE SKIP LOCKED), false) AS switched_off
            FROM ${S}.webhook_endpoints w
            WHERE w.workspace_id IS NULL AND w.deleted_at IS NULL AND (w.events = '{}' OR event_name = ANY(w.events))) p;
      IF FOUND THEN
        PERFORM pg_notify('frs_deliveries', '');
      END IF;
    END $fn$;

    CREATE OR REPLACE FUNCTION endpoint_switch_platform_event() RETURNS trigger LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $fn$
    DECLARE
      about jsonb := jsonb_build_object('endpointId', NEW.id, 'workspaceId', NEW.workspace_id,
        'workspaceSlug', (SELECT ws.slug FROM ${S}.workspaces ws WHERE ws.id = NEW.workspace_id));
    BEGIN
      IF NEW.is_active THEN
        PERFORM ${S}.platform_event_record('endpoint.enabled', about || jsonb_build_object('enabledAt', ${S}.iso_utc_text(now())));
      ELSE
        PERFORM ${S}.platform_event_record('endpoint.disabled', about || jsonb_build_object(
          'reason', NEW.disabled_reason, 'disabledAt', ${S}.iso_utc_text(NEW.disabled_at)));
      END IF;
      RETURN NULL;
    END $fn$;

    CREATE OR REPLACE FUNCTION delivery_failed_platform_event() RETURNS trigger LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $fn$
    BEGIN
      -- a sample delivery (the test operation's, an example event) is no receiver's failure
      IF EXISTS (SELECT 1 FROM ${S}.events e WHERE e.id = NEW.event_id AND e.source = 'test') THEN
        RETURN NULL;
      END IF;
      -- (an AFTER trigger sees the whole statement's work: the flush's attempt row of this very failure)
      PERFORM ${S}.platform_event_record('delivery.exhausted', jsonb_build_object(
        'deliveryId', NEW.id, 'event', NEW.event, 'endpointId', NEW.endpoint_id, 'workspaceId', NEW.workspace_id,
        'workspaceSlug', (SELECT ws.slug FROM ${S}.workspaces ws WHERE ws.id = NEW.workspace_id),
        'attempts', NEW.attempts, 'lastStatusCode', NEW.last_status_code,
        'lastErrorKind', (SELECT a.error_kind FROM ${S}.delivery_attempts a WHERE a.delivery_id = NEW.id ORDER BY a.number DESC LIMIT 1),
        'failedAt', ${S}.iso_utc_text(coalesce(NEW.finished_at, now()))));
      RETURN NULL;
    END $fn$;

    DROP TRIGGER deliveries_platform_events ON deliveries;
    CREATE TRIGGER deliveries_platform_events AFTER UPDATE OF status ON deliveries FOR EACH ROW
      WHEN (NEW.status = 'failed' AND OLD.status <> 'failed' AND NEW.attempts > OLD.attempts
            AND NEW.workspace_id IS NOT NULL AND NEW.event <> 'webhook.test')
      EXECUTE FUNCTION delivery_failed_platform_event();
  `);
}

// Back: the functions and the trigger as migration 20261128002400 made them.
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER deliveries_platform_events ON deliveries;
    CREATE TRIGGER deliveries_platform_events AFTER UPDATE OF status ON deliveries FOR EACH ROW
      WHEN (NEW.status = 'failed' AND OLD.status <> 'failed' AND NEW.workspace_id IS NOT NULL
            AND NEW.event <> 'webhook.test' AND NEW.error_kind IS DISTINCT FROM 'endpoint_deleted')
      EXECUTE FUNCTION delivery_failed_platform_event();

    CREATE OR REPLACE FUNCTION platform_event_record(event_name text, payload jsonb) RETURNS void LANGUAGE plpgsql AS $fn$
    DECLARE
      recorded events%ROWTYPE;
    BEGIN
      INSERT INTO events (workspace_id, event, data, source) VALUES (NULL, event_name, payload, 'platform')
        RETURNING * INTO recorded;
      INSERT INTO deliveries (id, workspace_id, event_id, endpoint_id, event, body, status, next_attempt_at)
      SELECT p.id, NULL, recorded.id, p.endpoint_id, event_name,
             json_build_object('id', p.id, 'event', event_name, 'createdAt', iso_utc_text(recorded.created_at), 'data', recorded.data)::text,
             'queued', now()
      FROM (SELECT gen_random_uuid() AS id, w.id AS endpoint_id FROM webhook_endpoints w
            WHERE w.workspace_id IS NULL AND w.deleted_at IS NULL AND (w.events = '{}' OR event_name = ANY(w.events))) p;
      IF FOUND THEN
        PERFORM pg_notify('frs_deliveries', '');
      END IF;
    END $fn$;

    CREATE OR REPLACE FUNCTION endpoint_switch_platform_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      about jsonb := jsonb_build_object('endpointId', NEW.id, 'workspaceId', NEW.workspace_id,
        'workspaceSlug', (SELECT ws.slug FROM workspaces ws WHERE ws.id = NEW.workspace_id));
    BEGIN
      IF NEW.is_active THEN
        PERFORM platform_event_record('endpoint.enabled', about || jsonb_build_object('enabledAt', iso_utc_text(now())));
      ELSE
        PERFORM platform_event_record('endpoint.disabled', about || jsonb_build_object(
          'reason', NEW.disabled_reason, 'disabledAt', iso_utc_text(NEW.disabled_at)));
      END IF;
      RETURN NULL;
    END $fn$;

    CREATE OR REPLACE FUNCTION delivery_failed_platform_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM platform_event_record('delivery.exhausted', jsonb_build_object(
        'deliveryId', NEW.id, 'event', NEW.event, 'endpointId', NEW.endpoint_id, 'workspaceId', NEW.workspace_id,
        'workspaceSlug', (SELECT ws.slug FROM workspaces ws WHERE ws.id = NEW.workspace_id),
        'attempts', NEW.attempts, 'lastStatusCode', NEW.last_status_code,
        'lastErrorKind', (SELECT a.error_kind FROM delivery_attempts a WHERE a.delivery_id = NEW.id ORDER BY a.number DESC LIMIT 1),
        'failedAt', iso_utc_text(coalesce(NEW.finished_at, now()))));
      RETURN NULL;
    END $fn$;
  `);
  for (const fn of FUNCTIONS) await knex.raw(`ALTER FUNCTION ${fn} RESET search_path`);
}
