import type { Knex } from 'knex';

// A workspace's time zone changed by the admin API (or the settings screen) regroups its collected payments into
// months of the new zone (the trigger of 20261123002210_payment_months). The admin API's database role may not touch
// payment figures (src/db/roles.ts), so the change failed on the trigger's statements: the function now runs as its
// owner (SECURITY DEFINER), its tables qualified with this schema and its search_path ending with pg_temp, as
// 20261125000500's functions are. Frozen SQL, imports nothing from src/.
export async function up(knex: Knex): Promise<void> {
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    CREATE OR REPLACE FUNCTION workspaces_payment_months() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ${S}, pg_temp AS $fn$
    BEGIN
      DELETE FROM ${S}.payment_months WHERE workspace_id = NEW.id;
      INSERT INTO ${S}.payment_months (workspace_id, month, collected)
      SELECT workspace_id, date_trunc('month', slot AT TIME ZONE NEW.timezone)::date, sum(collected)
      FROM ${S}.payment_slots WHERE workspace_id = NEW.id GROUP BY 1, 2;
      RETURN NULL;
    END $fn$;
    REVOKE ALL ON FUNCTION workspaces_payment_months() FROM PUBLIC;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION workspaces_payment_months() RETURNS trigger LANGUAGE plpgsql SECURITY INVOKER RESET search_path AS $fn$
    BEGIN
      DELETE FROM payment_months WHERE workspace_id = NEW.id;
      INSERT INTO payment_months (workspace_id, month, collected)
      SELECT workspace_id, date_trunc('month', slot AT TIME ZONE NEW.timezone)::date, sum(collected)
      FROM payment_slots WHERE workspace_id = NEW.id GROUP BY 1, 2;
      RETURN NULL;
    END $fn$;
    GRANT EXECUTE ON FUNCTION workspaces_payment_months() TO PUBLIC;`);
}
