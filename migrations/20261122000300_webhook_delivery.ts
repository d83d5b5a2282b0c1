import type { Knex } from 'knex';

// Webhook delivery: events (one per occurrence), deliveries (one per event and endpoint, with the exact body
// bytes fixed at creation), attempts (one row per HTTP attempt), the outbox the rental platform writes, test
// idempotency keys, each workspace's calendar-sweep state, and the changes the derived booking/payment events are
// made from (recorded by triggers only once a workspace's calendar sweep has started: history is not replayed).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE events (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      event text NOT NULL,
      dedupe_key text,
      data jsonb NOT NULL,
      source text NOT NULL CHECK (source IN ('publish', 'outbox', 'calendar', 'derived', 'test')),
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (workspace_id, dedupe_key)
    );
    CREATE INDEX events_workspace_created ON events (workspace_id, created_at);

    CREATE TABLE deliveries (
      -- the payload's id and the service-delivery header
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      event_id uuid NOT NULL REFERENCES events(id) ON DELETE CASCADE,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      event text NOT NULL,
      -- the exact bytes POSTed on every attempt
      body text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'retrying', 'accepted', 'failed', 'held')),
      attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
      next_attempt_at timestamptz,
      -- a dispatcher that claimed the delivery holds it until lease_until; after that another may retry it
      lease_owner text,
      lease_until timestamptz,
      last_status_code integer,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      UNIQUE (event_id, endpoint_id),
      CHECK ((status IN ('queued', 'retrying')) = (next_attempt_at IS NOT NULL))
    ) WITH (fillfactor = 70); -- room on each page, so that taking a lease is a HOT update
    -- the dispatcher claims the oldest due deliveries of each endpoint (at most its per-endpoint concurrency)
    CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at) WHERE status IN ('queued', 'retrying');
    CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, created_at);
    CREATE INDEX deliveries_held ON deliveries (endpoint_id, created_at) WHERE status = 'held';

    CREATE TABLE delivery_attempts (
      id bigserial PRIMARY KEY,
      delivery_id uuid NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      number integer NOT NULL CHECK (number >= 1),
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL CHECK (duration_ms >= 0),
      status_code integer,
      -- null when the endpoint accepted the delivery
      error_kind text CHECK (error_kind IN ('timeout', 'connection', 'redirect', 'status')),
      error text,
      -- the first 4 KiB of the response body
      response_body text CHECK (octet_length(response_body) <= 4096),
      UNIQUE (delivery_id, number)
    );

    CREATE TABLE outbox (
      id bigserial PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      event text NOT NULL,
      data jsonb NOT NULL,
      dedupe_key text,
      created_at timestamptz NOT NULL DEFAULT now(),
      processed_at timestamptz,
      event_id uuid REFERENCES events(id) ON DELETE SET NULL,
      -- why the row was refused (invalid against the event's schema, unknown event)
      error text
    );
    CREATE INDEX outbox_pending ON outbox (id) WHERE processed_at IS NULL;

    CREATE TABLE test_idempotency_keys (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      delivery_id uuid NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (workspace_id, key)
    );

    CREATE TABLE calendar_state (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
      first_swept_at timestamptz NOT NULL,
      last_swept_at timestamptz NOT NULL
    );

    CREATE TABLE entity_changes (
      id bigserial PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      event text NOT NULL,
      entity_id uuid NOT NULL,
      recorded_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX entity_changes_workspace ON entity_changes (workspace_id, id);

    -- booking.confirmed / booking.completed when a booking reaches that status (inserted so, or changed to it)
    CREATE FUNCTION bookings_record_changes() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'booking.' || n.status, n.id FROM new_rows n
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status IN ('confirmed', 'completed');
      ELSE
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'booking.' || n.status, n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status IN ('confirmed', 'completed') AND o.status IS DISTINCT FROM n.status;
      END IF;
      RETURN NULL;
    END $fn$;

    -- payment.captured (charge), payment.refunded (refund, deposit release), payment.deposit_held (deposit) when a
    -- captured payment arrives; payment.canceled when one is canceled
    CREATE FUNCTION payments_record_changes() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id,
               CASE WHEN n.status = 'canceled' THEN 'payment.canceled'
                    WHEN n.kind = 'charge' THEN 'payment.captured'
                    WHEN n.kind = 'deposit' THEN 'payment.deposit_held'
                    ELSE 'payment.refunded' END,
               n.id
        FROM new_rows n JOIN calendar_state c ON c.workspace_id = n.workspace_id;
      ELSE
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'payment.canceled', n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status = 'canceled' AND o.status <> 'canceled';
      END IF;
      RETURN NULL;
    END $fn$;

    CREATE TRIGGER bookings_changes_insert AFTER INSERT ON bookings REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION bookings_record_changes();
    CREATE TRIGGER bookings_changes_update AFTER UPDATE ON bookings REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION bookings_record_changes();
    CREATE TRIGGER payments_changes_insert AFTER INSERT ON payments REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION payments_record_changes();
    CREATE TRIGGER payments_changes_update AFTER UPDATE ON payments REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION payments_record_changes();

    -- invoice.issued when an issued invoice arrives (or a draft becomes issued), fine.created when a fine or toll is
    -- recorded, booking.extended when an extension is recorded
    CREATE FUNCTION invoices_record_changes() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'invoice.issued', n.id FROM new_rows n
        JOIN calendar_state c ON c.workspace_id = n.workspace_id WHERE n.status = 'issued';
      ELSE
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'invoice.issued', n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status = 'issued' AND o.status <> 'issued';
      END IF;
      RETURN NULL;
    END $fn$;
    CREATE FUNCTION inserted_record_changes() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      -- TG_ARGV[0]: the event name
      INSERT INTO entity_changes (workspace_id, event, entity_id)
      SELECT n.workspace_id, TG_ARGV[0], n.id FROM new_rows n JOIN calendar_state c ON c.workspace_id = n.workspace_id;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER invoices_changes_insert AFTER INSERT ON invoices REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION invoices_record_changes();
    CREATE TRIGGER invoices_changes_update AFTER UPDATE ON invoices REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION invoices_record_changes();
    CREATE TRIGGER fines_changes_insert AFTER INSERT ON fines REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION inserted_record_changes('fine.created');
    CREATE TRIGGER extensions_changes_insert AFTER INSERT ON extensions REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION inserted_record_changes('booking.extended');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER IF EXISTS bookings_changes_insert ON bookings; DROP TRIGGER IF EXISTS bookings_changes_update ON bookings;
    DROP TRIGGER IF EXISTS payments_changes_insert ON payments; DROP TRIGGER IF EXISTS payments_changes_update ON payments;
    DROP TRIGGER IF EXISTS invoices_changes_insert ON invoices; DROP TRIGGER IF EXISTS invoices_changes_update ON invoices;
    DROP TRIGGER IF EXISTS fines_changes_insert ON fines; DROP TRIGGER IF EXISTS extensions_changes_insert ON extensions;
    DROP FUNCTION IF EXISTS bookings_record_changes(), payments_record_changes(), invoices_record_changes(), inserted_record_changes();
    DROP TABLE IF EXISTS entity_changes, calendar_state, test_idempotency_keys, outbox, delivery_attempts, deliveries, events;
  `);
}
