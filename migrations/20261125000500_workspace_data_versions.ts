import type { Knex } from 'knex';

// A data version per workspace and area, kept by the database, so that an API answer's ETag is decided from one cheap
// read instead of rebuilding the answer (src/api/revalidation.ts). Two areas, so that the dispatcher's steady writes
// never change the tags of the summaries: `records` (the domain tables and their running totals) and `webhooks`
// (endpoints, events, deliveries and their attempts).
//
// A statement-level trigger on every table an answer reads adds 1 to the version of each workspace whose rows the
// statement changed, whoever the writer (the service, an import, the platform writing its tables directly): the
// function is SECURITY DEFINER, so a writer needs no grant on the version table. A version is the sum of 8 counters
// (slots), and a writer counts in a slot no other open transaction holds (FOR UPDATE SKIP LOCKED): concurrent writers
// of one workspace then do not wait for each other's commit, as they would on one row, unless 8 transactions hold all.
// The sum grows by one with every committed change, so two states a reader can see never share a version (a maximum
// would not do: a change that commits after a later-numbered one would leave it unchanged).
//
// Writes a trigger makes (a running total kept by a trigger, a payment updating its invoice) are covered by the
// statement that fired it, on a table with a trigger of its own here: so the function does nothing below trigger depth
// 1, and a statement costs one counter update per workspace, however many totals it moves. TRUNCATE counts a change
// for every workspace. The triggers fire ALWAYS, also for a writer that runs with session_replication_role = replica
// (logical replication's apply, a bulk copy that switches triggers off): such a change is a change all the same. The
// list of tables is written here as it is (a migration imports nothing from src/).
const RECORDS = [
  'owners',
  'fleets',
  'vehicles',
  'maintenance',
  'vehicle_documents',
  'customers',
  'bookings',
  'extensions',
  'invoices',
  'payments',
  'installments',
  'expenses',
  'fines',
  'integrations',
  // running totals kept by triggers (written directly only by a rebuild or a repair)
  'payment_slots',
  'customer_ledger',
  'vehicle_revenue',
  'booking_status_counts',
  'workspace_totals',
  'open_balances',
  'payment_days',
  'expense_months',
  'vehicle_state_counts',
  'payment_months',
  'vehicle_models',
];
const WEBHOOKS = ['webhook_endpoints', 'events', 'deliveries'];

/** The triggers of one table: `source` says where a changed row's workspace is (its own column, or its delivery's). */
function triggers(table: string, area: string, source = 'workspace_id'): string {
  const name = `${table}_data_version`;
  return `
    CREATE TRIGGER ${name}_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_version_bump('${area}', '${source}');
    CREATE TRIGGER ${name}_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_version_bump('${area}', '${source}');
    CREATE TRIGGER ${name}_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_version_bump('${area}', '${source}');
    CREATE TRIGGER ${name}_truncate AFTER TRUNCATE ON ${table}
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_version_bump('${area}', '${source}');
    ${['insert', 'update', 'delete', 'truncate'].map((op) => `ALTER TABLE ${table} ENABLE ALWAYS TRIGGER ${name}_${op};`).join('\n    ')}`;
}

const dropTriggers = (table: string) =>
  ['insert', 'update', 'delete', 'truncate']
    .map((op) => `DROP TRIGGER IF EXISTS ${table}_data_version_${op} ON ${table};`)
    .join('\n');

export async function up(knex: Knex): Promise<void> {
  // The functions run as their owner (SECURITY DEFINER): every table they name is qualified with this schema and their
  // search_path ends with pg_temp, so a writer's temporary table can never stand in for one (a temporary table named
  // workspaces, say, would otherwise be found first, and run the writer's code with the owner's rights).
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    CREATE TABLE workspace_data_versions (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      area text NOT NULL CHECK (area IN ('records', 'webhooks')),
      slot smallint NOT NULL CHECK (slot BETWEEN 0 AND 7),
      changes bigint NOT NULL,
      PRIMARY KEY (workspace_id, area, slot)
    );

    CREATE FUNCTION workspace_data_version_bump() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ${S}, pg_temp AS $fn$
    DECLARE
      changed uuid[];
      ws uuid;
    BEGIN
      -- covered by the statement whose trigger made this write
      IF pg_trigger_depth() > 1 THEN RETURN NULL; END IF;
      -- Static statements, one per case (PL/pgSQL plans each once per table and keeps the plan; a dynamic statement
      -- was planned on every write, and cost a one-row insert three times what this does).
      IF TG_OP = 'TRUNCATE' THEN
        SELECT array_agg(id) INTO changed FROM ${S}.workspaces;
      ELSIF TG_ARGV[1] = 'delivery' THEN
        IF TG_OP = 'DELETE' THEN
          SELECT array_agg(DISTINCT d.workspace_id) INTO changed FROM old_rows c JOIN ${S}.deliveries d ON d.id = c.delivery_id;
        ELSE
          SELECT array_agg(DISTINCT d.workspace_id) INTO changed FROM new_rows c JOIN ${S}.deliveries d ON d.id = c.delivery_id;
        END IF;
      ELSIF TG_ARGV[1] = 'id' THEN
        SELECT array_agg(DISTINCT c.id) INTO changed FROM new_rows c;
      ELSIF TG_OP = 'INSERT' THEN
        SELECT array_agg(DISTINCT c.workspace_id) INTO changed FROM new_rows c;
      ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(DISTINCT c.workspace_id) INTO changed FROM old_rows c;
      ELSE
        SELECT array_agg(DISTINCT u.workspace_id) INTO changed
        FROM (SELECT workspace_id FROM new_rows UNION ALL SELECT workspace_id FROM old_rows) u;
      END IF;
      -- Per workspace, in workspace order (two statements then never wait for each other in a circle), a workspace
      -- being deleted (its rows going with it) left out: the first of its 8 counters no other open transaction holds,
      -- this backend's own slot first (a transaction counting again takes the one it already holds); only when open
      -- transactions hold all 8 does it wait, for its own. Every workspace has its 8 counters per area from its start
      -- (workspace_data_versions_made below), so that a free one is always there to take.
      FOR ws IN SELECT w.id FROM ${S}.workspaces w WHERE w.id = ANY (changed) ORDER BY w.id LOOP
        UPDATE ${S}.workspace_data_versions v SET changes = v.changes + 1
        WHERE v.workspace_id = ws AND v.area = TG_ARGV[0] AND v.slot = (
          SELECT s.slot FROM ${S}.workspace_data_versions s WHERE s.workspace_id = ws AND s.area = TG_ARGV[0]
          ORDER BY (s.slot + 8 - pg_backend_pid() % 8) % 8 LIMIT 1 FOR UPDATE SKIP LOCKED);
        CONTINUE WHEN FOUND;
        INSERT INTO ${S}.workspace_data_versions AS v (workspace_id, area, slot, changes) VALUES (ws, TG_ARGV[0], pg_backend_pid() % 8, 1)
        ON CONFLICT (workspace_id, area, slot) DO UPDATE SET changes = v.changes + 1;
      END LOOP;
      RETURN NULL;
    END $fn$;
    REVOKE ALL ON FUNCTION workspace_data_version_bump() FROM PUBLIC;`);
  // Every workspace's 8 counters per area, from its start.
  await knex.raw(`
    CREATE FUNCTION workspace_data_versions_made() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ${S}, pg_temp AS $fn$
    BEGIN
      INSERT INTO ${S}.workspace_data_versions (workspace_id, area, slot, changes)
      SELECT w.id, a.area, n, 0 FROM new_rows w, (VALUES ('records'), ('webhooks')) a (area), generate_series(0, 7) n
      ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $fn$;
    REVOKE ALL ON FUNCTION workspace_data_versions_made() FROM PUBLIC;
    CREATE TRIGGER workspaces_data_versions_made AFTER INSERT ON workspaces REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_versions_made();
    ALTER TABLE workspaces ENABLE ALWAYS TRIGGER workspaces_data_versions_made;
    INSERT INTO workspace_data_versions (workspace_id, area, slot, changes)
    SELECT w.id, a.area, n, 0 FROM workspaces w, (VALUES ('records'), ('webhooks')) a (area), generate_series(0, 7) n;`);
  for (const table of RECORDS) await knex.raw(triggers(table, 'records'));
  for (const table of WEBHOOKS) await knex.raw(triggers(table, 'webhooks'));
  // an attempt's workspace is its delivery's; a workspace's own settings (its time zone) change every answer of it
  await knex.raw(triggers('delivery_attempts', 'webhooks', 'delivery'));
  await knex.raw(`
    CREATE TRIGGER workspaces_data_version_update AFTER UPDATE ON workspaces REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION workspace_data_version_bump('records', 'id');
    ALTER TABLE workspaces ENABLE ALWAYS TRIGGER workspaces_data_version_update;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    'DROP TRIGGER IF EXISTS workspaces_data_version_update ON workspaces; DROP TRIGGER IF EXISTS workspaces_data_versions_made ON workspaces;',
  );
  for (const table of [...RECORDS, ...WEBHOOKS, 'delivery_attempts']) await knex.raw(dropTriggers(table));
  await knex.raw(
    'DROP FUNCTION workspace_data_version_bump(); DROP FUNCTION workspace_data_versions_made(); DROP TABLE workspace_data_versions;',
  );
}
