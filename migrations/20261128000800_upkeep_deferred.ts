import type { Knex } from 'knex';

// Writes stay cheap, whoever writes (issue 32, point 5). Even planned once (20261128000700), the service's upkeep of a
// one-row write ran about 20 statements in the writer's transaction: a payment moves its invoice's paid and balance,
// which move the customer's ledger, the open balances and the booking's balance due, which move the booking's counts
// and its car's revenue... 4.6 ms of a writer's time against 0.4 ms for the row itself.
//
// Now a writer's transaction pays for a copy of its changed rows, not for the upkeep they cause: on the tables the
// platform writes that have rollups (payments, expenses, invoices, bookings, vehicles), a statement trigger appends the
// statement's old rows (sign -1) and new rows (sign +1) to a queue table of the same columns (upkeep_<table>), and the
// rollup triggers stand aside. The worker applies the queue (upkeep_fold(), about every 100 ms, and before it derives
// events from a change), so the figures follow a direct write after a bounded, visible delay (the worker's metric
// frs_upkeep_delay_seconds: the age of the oldest change not yet applied). It is never wrong: a fold applies each
// queued row once, in one transaction with its removal from the queue, through the same rollup functions the
// triggers run, and a row's old and new images telescope to its net change whatever order the folds apply them in.
//
// The service's own writes (batch writes, import jobs, the CLI, the bulk load) say `frs.upkeep = inline` in their
// transaction: the rollup triggers run as before, so a batch's totals commit with its records, and the queue is left
// alone. A fold runs inline too, for the writes it makes (an invoice's paid, say). A fold never waits long for a row a
// writer holds (lock_timeout below the deadlock timeout): it leaves that workspace's queue for a later fold, so a
// writer is never the one a deadlock with a fold aborts. Two folds of one workspace exclude each other (an advisory
// lock, tried, never waited for).
//
// How a fold applies a queued row: through per-session temporary tables of the base table's columns with the table's
// rollup functions as their triggers: the old images are inserted into upkeep_minus_<table> and deleted (the DELETE
// triggers subtract them), the new images inserted into upkeep_plus_<table> (the INSERT triggers add them). The data
// version triggers are on them too, so a fold changes the ETags of what it changed.
//
// The queue functions run as their owner (a writer needs no grant on the queue tables), name this schema's tables, and
// have search_path pg_catalog, pg_temp. The fold runs with the worker's own rights (its rollup triggers name tables
// unqualified: it puts this schema on its path for them, as rollups_compact() does).

/** table -> its rollup functions (their triggers stand aside for the queue unless frs.upkeep is inline) */
const DEFERRED: Record<string, string[]> = {
  payments: ['payments_rollup', 'payments_totals'],
  expenses: ['expenses_totals', 'expenses_months'],
  invoices: ['invoices_open_balances', 'invoices_rollup', 'invoices_open_dues'],
  bookings: ['bookings_rollup', 'bookings_vehicles_out'],
  vehicles: ['vehicles_state_counts', 'vehicles_models'],
};
const INLINE = `current_setting('frs.upkeep', true) = 'inline'`;
/** Queued rows of a table a fold takes per workspace at once: a backlog is worked off in bounded transactions. */
const FOLD_ROWS = 20_000;
/** How long a fold waits for a row a writer holds before it leaves the workspace for later (below deadlock_timeout). */
const FOLD_LOCK_TIMEOUT = '200ms';
/** rollup_changes()' skip (20261123002110): a workspace being bulk-loaded gets its rollups from rollups_rebuild. */
const notBulk = (alias: string) =>
  `${alias}.workspace_id IS DISTINCT FROM nullif(current_setting('frs.bulk_load_workspace', true), '')::uuid`;

/**
 * The copies of a name or a plate kept in other rows (a booking's customer and car, a ledger's name): a rename rewrote
 * every booking of the customer in the writer's transaction. Deferred too: a renamed customer's id is queued, and a
 * fold rewrites the copies from the row as it then stands (recomputed, so applying an id twice changes nothing).
 */
const COPY_TRIGGERS: Record<string, string[]> = {
  customers: ['customers_booking_refs', 'customers_ledger_names'],
  vehicles: ['vehicles_booking_refs'],
};

export async function up(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  const lit = (text: string) => `'${text.replaceAll("'", "''")}'`;
  const columnsOf = async (table: string) => {
    const { rows } = await knex.raw(
      `SELECT quote_ident(attname) AS name FROM pg_attribute WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
      [table],
    );
    return rows.map((r: { name: string }) => r.name) as string[];
  };

  for (const [table, functions] of Object.entries(DEFERRED)) {
    const columns = await columnsOf(table);
    await knex.raw(`
      CREATE TABLE upkeep_${table} (LIKE ${table});
      ALTER TABLE upkeep_${table} ADD COLUMN upkeep_sign smallint NOT NULL, ADD COLUMN upkeep_at timestamptz NOT NULL DEFAULT now();
      CREATE INDEX upkeep_${table}_workspace ON upkeep_${table} (workspace_id, upkeep_at);

      CREATE FUNCTION upkeep_queue_${table}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      BEGIN
        IF TG_OP <> 'INSERT' THEN
          -- (not the rows of a workspace being deleted: they go with it, and their totals too)
          INSERT INTO ${S}.upkeep_${table} (${columns.join(', ')}, upkeep_sign) SELECT ${columns.map((c) => `o.${c}`).join(', ')}, -1 FROM old_rows o
          WHERE ${notBulk('o')} AND EXISTS (SELECT 1 FROM ${S}.workspaces w WHERE w.id = o.workspace_id);
        END IF;
        IF TG_OP <> 'DELETE' THEN
          INSERT INTO ${S}.upkeep_${table} (${columns.join(', ')}, upkeep_sign) SELECT ${columns.map((c) => `n.${c}`).join(', ')}, 1 FROM new_rows n WHERE ${notBulk('n')};
        END IF;
        RETURN NULL;
      END $fn$;
      REVOKE ALL ON FUNCTION upkeep_queue_${table}() FROM PUBLIC;
      CREATE TRIGGER ${table}_upkeep_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT WHEN (NOT coalesce(${INLINE}, false)) EXECUTE FUNCTION upkeep_queue_${table}();
      CREATE TRIGGER ${table}_upkeep_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT WHEN (NOT coalesce(${INLINE}, false)) EXECUTE FUNCTION upkeep_queue_${table}();
      CREATE TRIGGER ${table}_upkeep_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT WHEN (NOT coalesce(${INLINE}, false)) EXECUTE FUNCTION upkeep_queue_${table}();`);
    // the rollup triggers, only inline
    const { rows: triggers } = await knex.raw(
      `SELECT t.tgname, pg_get_triggerdef(t.oid) AS def, t.tgenabled FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
       WHERE t.tgrelid = ?::regclass AND NOT t.tgisinternal AND p.proname = ANY (?) ORDER BY t.tgname`,
      [table, functions],
    );
    if (triggers.length !== functions.length * 3)
      throw new Error(`${table}: expected 3 triggers for each of ${functions.join(', ')}`);
    for (const { tgname, def, tgenabled } of triggers as Array<{ tgname: string; def: string; tgenabled: string }>) {
      if (def.includes(' WHEN ') || !def.includes(' EXECUTE FUNCTION '))
        throw new Error(`${tgname}: not the trigger this migration knows`);
      await knex.raw(`DROP TRIGGER ${tgname} ON ${table}; ${def.replace(' EXECUTE FUNCTION ', ` WHEN (${INLINE}) EXECUTE FUNCTION `)};
        ${tgenabled === 'A' ? `ALTER TABLE ${table} ENABLE ALWAYS TRIGGER ${tgname};` : ''}`);
    }
  }

  // A queued change moves its workspace's data version when it is applied (the fold's tables bump it), so the tables
  // whose every change is queued no longer bump it in the writer's transaction; nor is the worker woken by NOTIFY for
  // their changes (the NOTIFY took a lock every such commit queued on): the worker's fold tick derives their events.
  // A writer in session_replication_role = replica queues nothing (the queue triggers fire as the rollup triggers did):
  // its changes still move the version at once.
  for (const table of Object.keys(DEFERRED)) {
    for (const op of ['insert', 'update', 'delete']) {
      const name = `${table}_data_version_${op}`;
      const {
        rows: [trigger],
      } = await knex.raw(
        `SELECT pg_get_triggerdef(t.oid) AS def, t.tgenabled FROM pg_trigger t WHERE t.tgrelid = ?::regclass AND t.tgname = ?`,
        [table, name],
      );
      if (!trigger || trigger.def.includes(' WHEN ') || trigger.tgenabled !== 'A')
        throw new Error(`${name}: not the trigger this migration knows`);
      await knex.raw(`DROP TRIGGER ${name} ON ${table};
        ${trigger.def.replace(' EXECUTE FUNCTION ', ` WHEN (coalesce(${INLINE}, false) OR current_setting('session_replication_role') = 'replica') EXECUTE FUNCTION `)};
        ALTER TABLE ${table} ENABLE ALWAYS TRIGGER ${name};`);
    }
  }
  {
    const {
      rows: [trigger],
    } = await knex.raw(
      `SELECT pg_get_triggerdef(t.oid) AS def FROM pg_trigger t WHERE t.tgrelid = 'entity_changes'::regclass AND t.tgname = 'entity_changes_notify'`,
    );
    if (!trigger || trigger.def.includes(' WHEN '))
      throw new Error('entity_changes_notify: not the trigger this migration knows');
    await knex.raw(
      `DROP TRIGGER entity_changes_notify ON entity_changes; ${trigger.def.replace(' EXECUTE FUNCTION ', ` WHEN (${INLINE}) EXECUTE FUNCTION `)};`,
    );
  }

  // the copies: customers' renames queued by id; a car's plate through its queued images (the fold's plus table)
  for (const [table, names] of Object.entries(COPY_TRIGGERS)) {
    const { rows: triggers } = await knex.raw(
      `SELECT t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t WHERE t.tgrelid = ?::regclass AND t.tgname = ANY (?)`,
      [table, names],
    );
    if (triggers.length !== names.length) throw new Error(`${table}: expected the triggers ${names.join(', ')}`);
    for (const { tgname, def } of triggers as Array<{ tgname: string; def: string }>) {
      if (def.includes(' WHEN ') || !def.includes(' EXECUTE FUNCTION '))
        throw new Error(`${tgname}: not the trigger this migration knows`);
      await knex.raw(
        `DROP TRIGGER ${tgname} ON ${table}; ${def.replace(' EXECUTE FUNCTION ', ` WHEN (${INLINE}) EXECUTE FUNCTION `)};`,
      );
    }
  }
  await knex.raw(`
    CREATE TABLE upkeep_customers (workspace_id uuid NOT NULL, id uuid NOT NULL, upkeep_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX upkeep_customers_workspace ON upkeep_customers (workspace_id, upkeep_at);
    CREATE FUNCTION upkeep_queue_customers() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    BEGIN
      INSERT INTO ${S}.upkeep_customers (workspace_id, id)
      SELECT n.workspace_id, n.id FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE o.name IS DISTINCT FROM n.name;
      RETURN NULL;
    END $fn$;
    REVOKE ALL ON FUNCTION upkeep_queue_customers() FROM PUBLIC;
    CREATE TRIGGER customers_upkeep_update AFTER UPDATE ON customers REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT WHEN (NOT coalesce(${INLINE}, false)) EXECUTE FUNCTION upkeep_queue_customers();

    -- a fold's copies, from the rows as they stand (run by a fold, with this schema on its path)
    CREATE FUNCTION upkeep_customer_copies() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE bookings b SET customer_json = customer_ref_json(x.id, x.name) FROM customers x
      WHERE b.customer_id IN (SELECT n.id FROM new_rows n) AND x.id = b.customer_id
        AND b.customer_json IS DISTINCT FROM customer_ref_json(x.id, x.name);
      UPDATE customer_ledger l SET name = x.name FROM customers x
      WHERE l.customer_id IN (SELECT n.id FROM new_rows n) AND x.id = l.customer_id AND l.name IS DISTINCT FROM x.name;
      RETURN NULL;
    END $fn$;
    CREATE FUNCTION upkeep_vehicle_copies() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE bookings b SET vehicle_json = vehicle_ref_json(v.id, v.plate) FROM vehicles v
      WHERE b.vehicle_id IN (SELECT n.id FROM new_rows n) AND v.id = b.vehicle_id
        AND b.vehicle_json IS DISTINCT FROM vehicle_ref_json(v.id, v.plate);
      RETURN NULL;
    END $fn$;`);

  // A customer's first ledger row takes its name under a FOR SHARE lock on the customer (20261123002330), which a
  // rename by an inline writer must not slip past. In a fold it is not needed (a direct writer's rename queues the
  // customer, and the next fold rewrites the name from the row as it stands; an inline writer holds the workspace's
  // upkeep lock the fold holds), and the worker that folds may not lock customers (a row lock needs UPDATE rights).
  await knex.raw(`
    CREATE OR REPLACE FUNCTION customer_ledger_names() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF current_setting('frs.upkeep_fold', true) IS DISTINCT FROM 'on' THEN
        PERFORM 1 FROM customers c WHERE c.id IN (SELECT customer_id FROM new_rows) ORDER BY c.id FOR SHARE OF c;
      END IF;
      UPDATE customer_ledger l SET name = c.name
      FROM new_rows n JOIN customers c ON c.id = n.customer_id
      WHERE l.customer_id = n.customer_id AND l.name IS DISTINCT FROM c.name;
      RETURN NULL;
    END $fn$;`);

  // A booking's copies are recomputed by its row trigger under FOR SHARE locks (20261123003100): a fold writes them
  // from the rows as they stand already, and the worker may not lock customers.
  {
    const {
      rows: [{ def }],
    } = await knex.raw(`SELECT pg_get_functiondef('bookings_copy_refs()'::regprocedure) AS def`);
    const marker = "IF TG_OP = 'INSERT' THEN";
    if (String(def).split(marker).length !== 2)
      throw new Error('bookings_copy_refs is not the function this migration knows');
    await knex.raw(
      String(def).replace(
        marker,
        `IF TG_OP = 'UPDATE' AND current_setting('frs.upkeep_fold', true) = 'on' THEN RETURN NEW; END IF;
      ${marker}`,
      ),
    );
  }

  // Per session, the temporary tables a fold applies the queue through (made on a session's first fold).
  const replayTables =
    Object.entries(DEFERRED)
      .map(([table, functions]) => {
        const plus = `pg_temp.upkeep_plus_${table}`;
        const minus = `pg_temp.upkeep_minus_${table}`;
        const copies =
          table === 'vehicles'
            ? `
      CREATE TRIGGER upkeep_plus_copies AFTER INSERT ON ${plus} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${S}.upkeep_vehicle_copies();`
            : '';
        return `
      CREATE TEMPORARY TABLE upkeep_plus_${table} (LIKE ${S}.${table});
      CREATE TEMPORARY TABLE upkeep_minus_${table} (LIKE ${S}.${table});
      ${[...functions.map((f) => `${S}.${f}()`), `${S}.workspace_data_version_bump('records', 'workspace_id')`]
        .map(
          (call, k) => `
      CREATE TRIGGER upkeep_plus_${k} AFTER INSERT ON ${plus} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${call};
      CREATE TRIGGER upkeep_minus_${k} AFTER DELETE ON ${minus} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${call};`,
        )
        .join('')}${copies}`;
      })
      .join('') +
    `
      CREATE TEMPORARY TABLE upkeep_plus_customers (workspace_id uuid, id uuid);
      CREATE TRIGGER upkeep_plus_copies AFTER INSERT ON pg_temp.upkeep_plus_customers REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION ${S}.upkeep_customer_copies();
      CREATE TRIGGER upkeep_plus_version AFTER INSERT ON pg_temp.upkeep_plus_customers REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION ${S}.workspace_data_version_bump('records', 'workspace_id');`;
  // (one query at a time: a migration runs on one connection)
  const columnLists: Record<string, string[]> = {};
  for (const table of Object.keys(DEFERRED)) columnLists[table] = await columnsOf(table);
  /** The queued rows of workspace `ws` a fold takes at once (any subset adds up: a row's images telescope). */
  const taken = (table: string) =>
    `u.ctid = ANY (ARRAY(SELECT t.ctid FROM ${S}.upkeep_${table} t WHERE t.workspace_id = ws LIMIT ${FOLD_ROWS}))`;
  const applies =
    Object.keys(DEFERRED)
      .map((table) => {
        const names = columnLists[table].join(', ');
        const columns = columnLists[table].map((c) => `q.${c}`).join(', ');
        return `
        IF which IS NULL OR which = '${table}' THEN
        WITH q AS (DELETE FROM ${S}.upkeep_${table} u WHERE ${taken(table)} RETURNING u.*),
        minus AS (INSERT INTO pg_temp.upkeep_minus_${table} (${names}) SELECT ${columns} FROM q WHERE q.upkeep_sign < 0)
        INSERT INTO pg_temp.upkeep_plus_${table} (${names}) SELECT ${columns} FROM q WHERE q.upkeep_sign > 0;
        GET DIAGNOSTICS n = ROW_COUNT;
        done := done + n;
        DELETE FROM pg_temp.upkeep_minus_${table};
        GET DIAGNOSTICS n = ROW_COUNT;
        done := done + n;
        TRUNCATE pg_temp.upkeep_plus_${table}, pg_temp.upkeep_minus_${table};
        END IF;`;
      })
      .join('') +
    `
        IF which IS NULL OR which = 'customers' THEN
        WITH q AS (DELETE FROM ${S}.upkeep_customers u WHERE ${taken('customers')} RETURNING u.workspace_id, u.id)
        INSERT INTO pg_temp.upkeep_plus_customers SELECT DISTINCT q.workspace_id, q.id FROM q;
        GET DIAGNOSTICS n = ROW_COUNT;
        done := done + n;
        TRUNCATE pg_temp.upkeep_plus_customers;
        END IF;`;
  const queued = [...Object.keys(DEFERRED), 'customers']
    .map((table) => `SELECT workspace_id, upkeep_at, '${table}' AS queue FROM ${S}.upkeep_${table}`)
    .join(' UNION ALL ');
  await knex.raw(`
    -- which: one queue (payments, expenses, invoices, bookings, vehicles or customers), or all (NULL); the worker folds
    -- a queue a transaction, so that the rows a fold writes (an invoice's paid) are held no longer than that queue's part
    CREATE FUNCTION upkeep_fold(workspaces uuid[], which text DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql SECURITY INVOKER
      SET search_path = pg_catalog, pg_temp SET lock_timeout = '${FOLD_LOCK_TIMEOUT}' AS $fn$
    DECLARE
      ws uuid;
      n bigint;
      done bigint;
      applied bigint := 0;
    BEGIN
      -- the rollup functions name this schema's tables unqualified: for them, this schema, ahead of pg_temp (restored
      -- when the function returns, by its SET clause); and the writes they make are applied at once
      PERFORM pg_catalog.set_config('search_path', 'pg_catalog, ${S.replaceAll("'", "''")}, pg_temp', true);
      PERFORM pg_catalog.set_config('frs.upkeep', 'inline', true);
      PERFORM pg_catalog.set_config('frs.upkeep_fold', 'on', true);
      IF pg_catalog.to_regclass('pg_temp.upkeep_plus_payments') IS NULL THEN
        ${replayTables}
      END IF;
      -- Workspace by workspace, each in a subtransaction: a fold never waits long for a lock (lock_timeout, below the
      -- deadlock timeout, so that a writer holding a row it needs is never the one a deadlock aborts); a workspace
      -- whose rows are held, or whose lock another fold holds, keeps its queue for a later fold, the others go on.
      FOR ws IN SELECT DISTINCT q.workspace_id FROM (${queued}) q WHERE (workspaces IS NULL OR q.workspace_id = ANY (workspaces))
                  AND (which IS NULL OR q.queue = which)
                ORDER BY 1 LOOP
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('frs.upkeep'), pg_catalog.hashtext(ws::text));
        -- a workspace deleted since (its totals went with it): its queue is dropped, not applied
        IF NOT EXISTS (SELECT 1 FROM ${S}.workspaces w WHERE w.id = ws) THEN
          ${[...Object.keys(DEFERRED), 'customers'].map((table) => `IF which IS NULL OR which = '${table}' THEN DELETE FROM ${S}.upkeep_${table} u WHERE u.workspace_id = ws; END IF;`).join(' ')}
          CONTINUE;
        END IF;
        done := 0;
        BEGIN
          ${applies}
          applied := applied + done;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
          NULL;
        END;
      END LOOP;
      PERFORM pg_catalog.set_config('frs.upkeep_fold', '', true);
      RETURN applied;
    END $fn$;
    REVOKE ALL ON FUNCTION upkeep_fold(uuid[], text) FROM PUBLIC;

    -- how long ago the oldest change not yet applied was committed (0 when none waits): the worker's metric
    CREATE FUNCTION upkeep_delay() RETURNS double precision LANGUAGE sql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $fn$
      SELECT coalesce(extract(epoch FROM pg_catalog.now() - min(q.upkeep_at)), 0)::double precision FROM (${queued}) q
    $fn$;
    REVOKE ALL ON FUNCTION upkeep_delay() FROM PUBLIC;

    -- When the oldest change of a workspace not yet applied was written (null: none): a derived event waits for the
    -- fold of the changes before it, so that its figures (an invoice's balance) include them.
    CREATE FUNCTION upkeep_oldest(ws uuid) RETURNS timestamptz LANGUAGE sql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $fn$
      SELECT min(q.upkeep_at) FROM (${[...Object.keys(DEFERRED), 'customers'].map((table) => `(SELECT u.upkeep_at FROM ${S}.upkeep_${table} u WHERE u.workspace_id = ws ORDER BY u.upkeep_at LIMIT 1)`).join(' UNION ALL ')}) q (upkeep_at)
    $fn$;
    REVOKE ALL ON FUNCTION upkeep_oldest(uuid) FROM PUBLIC;

    -- A bulk load of a workspace holding no rows rebuilds its totals from scratch: the queued changes of rows deleted
    -- before it (minus images) are in that rebuild already, and applied after it would count twice. Run by the loader
    -- (the ingest role, which has no grant on the queues), as the owner.
    CREATE FUNCTION upkeep_discard(ws uuid) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    BEGIN
      ${[...Object.keys(DEFERRED), 'customers'].map((table) => `DELETE FROM ${S}.upkeep_${table} u WHERE u.workspace_id = ws;`).join(' ')}
    END $fn$;
    REVOKE ALL ON FUNCTION upkeep_discard(uuid) FROM PUBLIC;
    COMMENT ON FUNCTION upkeep_fold(uuid[], text) IS ${lit('Applies the queued changes of direct writers (upkeep_<table>) to the running totals: of the workspaces given, or of all (NULL).')};`);
}

export async function down(): Promise<void> {
  throw new Error('20261128000800_upkeep_deferred cannot be undone (restore a backup)');
}
