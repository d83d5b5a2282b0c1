import type { Knex } from 'knex';
import { createRollupTriggers, dropRollupTriggers } from './support/rollup-triggers.js';

// Two more running totals, kept like the others (statement-level triggers applying signed transition-table
// deltas), so the finance overview's six-month trend reads a few hundred rows whatever the size of the book:
//   payment_days    per workspace and UTC day: the payment_slots of that day summed (net collected). A local month
//                   is the UTC days wholly inside it plus the 15-minute slots of the part-days at its two ends
//                   (every offset is a multiple of 15 minutes), so it stays exact in every time zone.
//   expense_months  per workspace and calendar month of the expense's date (a plain local date): the amount.
// Existing data is backfilled.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE payment_days (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      day date NOT NULL,
      collected bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, day)
    );
    CREATE TABLE expense_months (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      month date NOT NULL,
      amount bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (workspace_id, month)
    );

    CREATE FUNCTION payment_slots_days() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO payment_days AS d (workspace_id, day, collected)
        SELECT c.workspace_id, (c.slot AT TIME ZONE 'UTC')::date, sum(sign * collected)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, day) DO UPDATE SET collected = d.collected + excluded.collected
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    CREATE FUNCTION expenses_months() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      EXECUTE format($q$
        WITH c AS (%s)
        INSERT INTO expense_months AS m (workspace_id, month, amount)
        SELECT c.workspace_id, date_trunc('month', c.date)::date, sum(sign * amount)
        FROM c WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id)
        GROUP BY 1, 2
        ON CONFLICT (workspace_id, month) DO UPDATE SET amount = m.amount + excluded.amount
      $q$, rollup_changes(TG_OP));
      RETURN NULL;
    END $fn$;

    INSERT INTO payment_days (workspace_id, day, collected)
    SELECT workspace_id, (slot AT TIME ZONE 'UTC')::date, sum(collected) FROM payment_slots GROUP BY 1, 2;
    INSERT INTO expense_months (workspace_id, month, amount)
    SELECT workspace_id, date_trunc('month', date)::date, sum(amount) FROM expenses GROUP BY 1, 2;`);
  await knex.raw(createRollupTriggers('payment_slots', 'payment_slots_days'));
  await knex.raw(createRollupTriggers('expenses', 'expenses_months'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(dropRollupTriggers('payment_slots', 'payment_slots_days'));
  await knex.raw(dropRollupTriggers('expenses', 'expenses_months'));
  await knex.raw(
    `DROP FUNCTION payment_slots_days(); DROP FUNCTION expenses_months(); DROP TABLE payment_days, expense_months;`,
  );
}
