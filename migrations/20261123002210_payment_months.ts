import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

// Net collected per workspace and month of the workspace's own calendar, so the finance overview's six-month trend
// (and this month) reads six rows instead of summing UTC days and the 15-minute slots of each month's part-days.
//   payment_months  kept from payment_slots by a statement trigger (signed transition-table deltas, as every rollup):
//                   a slot lies wholly inside one local month, every offset being a multiple of 15 minutes, so the
//                   months are exact sums of slots. The workspace's zone is read with a share lock on its row, so a
//                   change of zone and a payment never cross: whichever comes second sees the other.
//   a change of a workspace's time zone rebuilds that workspace's months from its slots.
// Existing data is backfilled.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE payment_months (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      month date NOT NULL,
      collected bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, month)
    );

    CREATE FUNCTION payment_slots_months() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s),
        zone AS (SELECT w.id, w.timezone FROM workspaces w WHERE w.id IN (SELECT workspace_id FROM c) FOR SHARE)
        INSERT INTO payment_months AS m (workspace_id, month, collected)
        SELECT c.workspace_id, date_trunc('month', c.slot AT TIME ZONE zone.timezone)::date, sum(sign * c.collected)
        FROM c JOIN zone ON zone.id = c.workspace_id
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, month) DO UPDATE SET collected = m.collected + excluded.collected
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION workspaces_payment_months() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM payment_months WHERE workspace_id = NEW.id;
      INSERT INTO payment_months (workspace_id, month, collected)
      SELECT workspace_id, date_trunc('month', slot AT TIME ZONE NEW.timezone)::date, sum(collected)
      FROM payment_slots WHERE workspace_id = NEW.id GROUP BY 1, 2;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER workspaces_payment_months AFTER UPDATE OF timezone ON workspaces
      FOR EACH ROW WHEN (OLD.timezone IS DISTINCT FROM NEW.timezone) EXECUTE FUNCTION workspaces_payment_months();

    INSERT INTO payment_months (workspace_id, month, collected)
    SELECT s.workspace_id, date_trunc('month', s.slot AT TIME ZONE w.timezone)::date, sum(s.collected)
    FROM payment_slots s JOIN workspaces w ON w.id = s.workspace_id
    GROUP BY 1, 2;`);
  await knex.raw(createRollupTriggers('payment_slots', 'payment_slots_months'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(dropRollupTriggers('payment_slots', 'payment_slots_months'));
  await knex.raw(`
    DROP TRIGGER workspaces_payment_months ON workspaces;
    DROP FUNCTION workspaces_payment_months(); DROP FUNCTION payment_slots_months();
    DROP TABLE payment_months;`);
}
