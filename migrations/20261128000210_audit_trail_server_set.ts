import type { Knex } from 'knex';

// The audit trail is the server's: an entry's id, time and request id are set here, whoever inserts it, and the actor
// it names must be one the database knows. A BEFORE INSERT trigger overwrites `id` (a new uuid) and `at` (the
// statement's clock) and takes `request_id` from the transaction-local setting frs.request_id, which the server sets
// (src/core/audit.ts), of the server's shape (src/api/app.ts newRequestId); the service roles may not even name those columns in an INSERT (src/db/roles.ts grants the others
// only). An admin token or settings-screen session actor must exist, and its name is the database's (the token's name;
// the session's "settings screen (link by <maker>)"); a `cli` actor only from the owner's own sessions (the CLI's),
// never from a service role. `client_request_id` keeps the X-Request-Id a client sent, as given (redacted).
//
// What this cannot do: a session holding the admin role may still set frs.request_id itself, and name another existing
// token as actor; and the service processes log in as the owner (then SET ROLE), so code running inside one can leave
// the role. The database cannot tell the server from its own process; it keeps the rest of a session's choices out.
// The trigger runs as the inserting role (SECURITY INVOKER: it reads only what the admin role reads), its search_path
// pg_catalog and pg_temp, every table qualified. Frozen SQL, imports nothing from src/.
export async function up(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    ALTER TABLE audit_entries ADD COLUMN client_request_id text CHECK (length(client_request_id) <= 200);
    CREATE FUNCTION audit_entries_server_set() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
    DECLARE
      known text;
    BEGIN
      NEW.id := gen_random_uuid();
      NEW.at := clock_timestamp();
      NEW.request_id := nullif(current_setting('frs.request_id', true), '');
      IF NEW.request_id !~ '^req_[A-Za-z0-9_-]{16}$' THEN
        RAISE EXCEPTION 'an audit entry''s request id is one the server made (req_ and 16 characters)' USING ERRCODE = '42501';
      END IF;
      IF NEW.actor_type = 'admin_token' THEN
        SELECT t.name INTO known FROM ${S}.admin_tokens t WHERE t.id = NEW.actor_id;
      ELSIF NEW.actor_type = 'portal_session' THEN
        SELECT 'settings screen (link by ' || s.created_by || ')' INTO known FROM ${S}.portal_sessions s WHERE s.id = NEW.actor_id;
      ELSIF pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = '${S}.audit_entries'::regclass), 'USAGE') THEN
        known := NEW.actor_name;
      END IF;
      IF known IS NULL THEN
        RAISE EXCEPTION 'an audit entry must name an actor the database knows (% %)', NEW.actor_type, coalesce(NEW.actor_id::text, 'from a service role')
          USING ERRCODE = '42501';
      END IF;
      NEW.actor_name := known;
      RETURN NEW;
    END $fn$;
    CREATE TRIGGER audit_entries_server_set BEFORE INSERT ON audit_entries FOR EACH ROW EXECUTE FUNCTION audit_entries_server_set();
    ALTER TABLE audit_entries ENABLE ALWAYS TRIGGER audit_entries_server_set;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER audit_entries_server_set ON audit_entries;
    DROP FUNCTION audit_entries_server_set();
    ALTER TABLE audit_entries DROP COLUMN client_request_id;`);
}
