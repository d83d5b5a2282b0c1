import type { Knex } from 'knex';

// Operational events: the platform's own receivers ("operational endpoints", registered through the admin API) are
// told when a workspace's endpoint is switched off (`endpoint.disabled`, with webhook_endpoints.disabled_reason and
// disabled_at) or on again (`endpoint.enabled`), and when a workspace's delivery fails for good (`delivery.exhausted`).
//
// Where they live: the same tables as every delivery, with workspace_id NULL. Every tenant query says
// `workspace_id = X`, which NULL never equals, and fan-out joins an event's endpoints on `w.workspace_id =
// e.workspace_id`, so by construction no workspace lists, reads, counts or receives them, and no operational event
// reaches a workspace's endpoint (nor a workspace's event an operational endpoint). The engine sends them as any
// delivery (claim, signing, retries, destination policy, attempt records, retention), the platform counting as a tenant
// of its own in the fair claim (src/webhooks/platform-events.ts: PLATFORM_TENANT). A hidden "platform workspace" row
// was the other way: every workspace list, look-up, key, import and screen would have had to refuse it, one by one.
//
// When they are made: by the AFTER UPDATE row triggers below, in the transaction of the change they report, so
// nothing is lost on a crash and every writer is covered (the dispatcher's flush, the admin API, the CLI, the
// settings screen, a 410 switch-off, held or frozen deliveries failed after 7 days). The WHEN clauses keep them off
// every other update (a lease, a retry) at the cost of one comparison. Only a workspace's rows raise them
// (`workspace_id IS NOT NULL`): an operational endpoint switched off, or an operational delivery failed, raises
// nothing, so they cannot loop. Left out: test deliveries (webhook.test) and deliveries failed because their endpoint
// was deleted (error_kind endpoint_deleted): neither is a receiver's failure.
//
// The trigger functions run with the writer's rights (the worker, the admin API, the owner): each already may read
// webhook_endpoints' ids and events, workspaces' slugs and delivery_attempts, and insert events and deliveries
// (src/db/roles.ts); the API and ingest roles change neither is_active nor a delivery's status. A delivery to an
// operational endpoint is queued even while that endpoint is off (the claim skips an off endpoint: it is sent once
// switched on), so the trigger takes no lock on operational endpoints (a lock there, inside the dispatcher's flush
// that already holds workspace endpoints, could deadlock with another flush).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints ALTER COLUMN workspace_id DROP NOT NULL;
    ALTER TABLE events ALTER COLUMN workspace_id DROP NOT NULL;
    ALTER TABLE deliveries ALTER COLUMN workspace_id DROP NOT NULL;
    ALTER TABLE events DROP CONSTRAINT events_source_check,
      ADD CONSTRAINT events_source_check CHECK (source IN ('publish', 'outbox', 'calendar', 'derived', 'test', 'platform')),
      ADD CONSTRAINT events_platform_without_workspace CHECK ((workspace_id IS NULL) = (source = 'platform')),
      ADD CONSTRAINT events_platform_known CHECK (workspace_id IS NOT NULL OR event IN ('endpoint.disabled', 'endpoint.enabled', 'delivery.exhausted'));
    ALTER TABLE deliveries ADD CONSTRAINT deliveries_platform_known
      CHECK (workspace_id IS NOT NULL OR event IN ('endpoint.disabled', 'endpoint.enabled', 'delivery.exhausted'));
    CREATE INDEX webhook_endpoints_platform ON webhook_endpoints (created_at, id) WHERE workspace_id IS NULL AND deleted_at IS NULL;

    -- one operational event, and its deliveries to every live operational endpoint subscribed to it (none: all)
    CREATE FUNCTION platform_event_record(event_name text, payload jsonb) RETURNS void LANGUAGE plpgsql AS $fn$
    DECLARE
      recorded events%ROWTYPE;
    BEGIN
      INSERT INTO events (workspace_id, event, data, source) VALUES (NULL, event_name, payload, 'platform')
        RETURNING * INTO recorded;
      -- the body as fan-out builds it (src/webhooks/fanout.ts, BODY_SQL)
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

    CREATE FUNCTION endpoint_switch_platform_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
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
    CREATE TRIGGER webhook_endpoints_platform_events AFTER UPDATE OF is_active ON webhook_endpoints FOR EACH ROW
      WHEN (OLD.is_active IS DISTINCT FROM NEW.is_active AND NEW.workspace_id IS NOT NULL)
      EXECUTE FUNCTION endpoint_switch_platform_event();

    CREATE FUNCTION delivery_failed_platform_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      -- (an AFTER trigger sees the whole statement's work: the flush's attempt row of this very failure)
      PERFORM platform_event_record('delivery.exhausted', jsonb_build_object(
        'deliveryId', NEW.id, 'event', NEW.event, 'endpointId', NEW.endpoint_id, 'workspaceId', NEW.workspace_id,
        'workspaceSlug', (SELECT ws.slug FROM workspaces ws WHERE ws.id = NEW.workspace_id),
        'attempts', NEW.attempts, 'lastStatusCode', NEW.last_status_code,
        'lastErrorKind', (SELECT a.error_kind FROM delivery_attempts a WHERE a.delivery_id = NEW.id ORDER BY a.number DESC LIMIT 1),
        'failedAt', iso_utc_text(coalesce(NEW.finished_at, now()))));
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER deliveries_platform_events AFTER UPDATE OF status ON deliveries FOR EACH ROW
      WHEN (NEW.status = 'failed' AND OLD.status <> 'failed' AND NEW.workspace_id IS NOT NULL
            AND NEW.event <> 'webhook.test' AND NEW.error_kind IS DISTINCT FROM 'endpoint_deleted')
      EXECUTE FUNCTION delivery_failed_platform_event();
  `);
}

// Back: the platform's rows go (the schema before this one has no place for them).
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER deliveries_platform_events ON deliveries;
    DROP TRIGGER webhook_endpoints_platform_events ON webhook_endpoints;
    DROP FUNCTION delivery_failed_platform_event(), endpoint_switch_platform_event(), platform_event_record(text, jsonb);
    DELETE FROM deliveries WHERE workspace_id IS NULL;
    DELETE FROM events WHERE workspace_id IS NULL;
    DELETE FROM webhook_endpoints WHERE workspace_id IS NULL;
    DROP INDEX webhook_endpoints_platform;
    ALTER TABLE deliveries DROP CONSTRAINT deliveries_platform_known;
    ALTER TABLE events DROP CONSTRAINT events_platform_known, DROP CONSTRAINT events_platform_without_workspace,
      DROP CONSTRAINT events_source_check,
      ADD CONSTRAINT events_source_check CHECK (source IN ('publish', 'outbox', 'calendar', 'derived', 'test'));
    ALTER TABLE deliveries ALTER COLUMN workspace_id SET NOT NULL;
    ALTER TABLE events ALTER COLUMN workspace_id SET NOT NULL;
    ALTER TABLE webhook_endpoints ALTER COLUMN workspace_id SET NOT NULL;
  `);
}
