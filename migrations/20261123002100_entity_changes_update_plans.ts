import type { Knex } from 'knex';

// The update branches of the change-recording triggers (webhook_delivery migration) join the statement's old and new
// rows on id. As static PL/pgSQL statements their plan is cached with the transition tables estimated at one row
// each, so the join ran as a nested loop: quadratic in the rows a statement updates (5,000 invoices: 0.7 s; the
// bulk loads update hundreds of thousands). Run through EXECUTE they are planned with the real row counts (a hash
// join). Same statements, same results.

const RECORDERS = {
  bookings_record_changes: {
    insert: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'booking.' || n.status, n.id FROM new_rows n
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status IN ('confirmed', 'completed');`,
    update: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'booking.' || n.status, n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status IN ('confirmed', 'completed') AND o.status IS DISTINCT FROM n.status`,
  },
  payments_record_changes: {
    insert: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id,
               CASE WHEN n.status = 'canceled' THEN 'payment.canceled'
                    WHEN n.kind = 'charge' THEN 'payment.captured'
                    WHEN n.kind = 'deposit' THEN 'payment.deposit_held'
                    ELSE 'payment.refunded' END,
               n.id
        FROM new_rows n JOIN calendar_state c ON c.workspace_id = n.workspace_id;`,
    update: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'payment.canceled', n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status = 'canceled' AND o.status <> 'canceled'`,
  },
  invoices_record_changes: {
    insert: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'invoice.issued', n.id FROM new_rows n
        JOIN calendar_state c ON c.workspace_id = n.workspace_id WHERE n.status = 'issued';`,
    update: `
        INSERT INTO entity_changes (workspace_id, event, entity_id)
        SELECT n.workspace_id, 'invoice.issued', n.id FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN calendar_state c ON c.workspace_id = n.workspace_id
        WHERE n.status = 'issued' AND o.status <> 'issued'`,
  },
};

function recorder(name: string, insert: string, update: string): string {
  return `
    CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF TG_OP = 'INSERT' THEN${insert}
      ELSE
        ${update};
      END IF;
      RETURN NULL;
    END $fn$;`;
}

export async function up(knex: Knex): Promise<void> {
  for (const [name, { insert, update }] of Object.entries(RECORDERS)) {
    await knex.raw(recorder(name, insert, `EXECUTE $q$${update}$q$`));
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name, { insert, update }] of Object.entries(RECORDERS)) await knex.raw(recorder(name, insert, update));
}
